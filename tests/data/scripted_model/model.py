"""A decoupled Python-backend LLM stand-in whose token timing is scripted (for load-test tests).

Same tensors as trtbench's ``ensemble`` model: inputs ``text_input`` BYTES, ``max_tokens``
INT32 and optional ``stream`` / ``exclude_input_in_output`` BOOL, ``min_tokens`` / ``end_id``
INT32; outputs ``text_output`` BYTES, ``output_ids`` INT32 and per-response
``draft_tokens_proposed`` / ``draft_tokens_accepted`` INT32.

Timing (config parameters): the first response carries ``first_tokens`` tokens at
``first_delay_ms`` after the request reached ``execute``; then every ``step_ms`` a response
with ``tokens_per_step`` tokens (the last one may carry fewer) until ``max_tokens``. Deadlines
are absolute (start + offset), so sleeps never accumulate drift. Each request runs in its own
worker thread (a pool started once; ``execute`` only queues), so concurrent requests are
served concurrently. ``empty_final`` = true sends the
final flag in a separate response without outputs (as Triton ensembles do); otherwise the
last token response carries it. With ``stream`` false, one response with every token comes
at the time the last token would have. Token k of a request is id ``100 + k % 50``, text
``"t<id> "``; each step after the first reports ``draft_per_step`` proposed and
``tokens_per_step - 1`` accepted draft tokens. Deterministic: no randomness anywhere.

``slow_file`` (a file path; empty: off): a request that starts while the file exists runs
``slow_factor`` times slower (every offset of its timetable multiplied), a drift of the host
that a test switches on by creating the file.

``send_log`` (a file path; empty: off) records the ground truth the load-test tests compare
against: one line ``<request id> <response index> <time.monotonic_ns()>`` taken just before
each response is sent. ``time.monotonic_ns`` and the client's ``time.perf_counter_ns`` read
the same clock on Linux (``CLOCK_MONOTONIC``), so a client's receive time minus this is the
time from the server's send to the client's record.
"""

import json
import os
import queue
import sys
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _scalar(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0]


class TritonPythonModel:
    def initialize(self, args):
        # Hand the GIL over within 1 ms (default 5 ms) so a thread whose deadline came
        # is not kept waiting by the others.
        sys.setswitchinterval(0.001)
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.first_delay_s = float(params.get("first_delay_ms", "40")) / 1000.0
        self.first_tokens = int(params.get("first_tokens", "1"))
        self.step_s = float(params.get("step_ms", "10")) / 1000.0
        self.tokens_per_step = int(params.get("tokens_per_step", "2"))
        self.draft_per_step = int(params.get("draft_per_step", "4"))
        self.empty_final = params.get("empty_final", "true").lower() == "true"
        self.slow_file = params.get("slow_file", "")
        self.slow_factor = float(params.get("slow_factor", "2"))
        path = params.get("send_log", "")
        self.send_log = open(path, "a", buffering=1) if path else None  # noqa: SIM115
        self.log_lock = threading.Lock()
        self.queue = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=self._work, daemon=True)
            for _ in range(int(params.get("worker_threads", "64")))
        ]
        for thread in self.threads:
            thread.start()

    def execute(self, requests):
        start = time.monotonic()
        for request in requests:
            self.queue.put((request, start))
        return None

    def _work(self):
        while True:
            item = self.queue.get()
            if item is None:
                return
            self._serve(*item)

    def _plan(self, max_tokens):
        """[(offset_s, first_token_index, n_tokens)] for one request."""
        steps = [(self.first_delay_s, 0, min(self.first_tokens, max_tokens))]
        done, k = steps[0][2], 1
        while done < max_tokens:
            n = min(self.tokens_per_step, max_tokens - done)
            steps.append((self.first_delay_s + k * self.step_s, done, n))
            done, k = done + n, k + 1
        return steps

    def _response(self, first, n, drafted, accepted):
        ids = np.array([100 + (first + i) % 50 for i in range(n)], dtype=np.int32)
        text = "".join(f"t{i} " for i in ids).encode()
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor("text_output", np.array([text], dtype=np.object_)),
                pb_utils.Tensor("output_ids", ids.reshape(1, -1)),
                pb_utils.Tensor(
                    "draft_tokens_proposed", np.array([[drafted]], dtype=np.int32)
                ),
                pb_utils.Tensor(
                    "draft_tokens_accepted", np.array([[accepted]], dtype=np.int32)
                ),
            ]
        )

    def _send(self, sender, request_id, index, response=None, flags=0):
        """Send one response; first note its send time in the send log."""
        if self.send_log is not None:
            line = f"{request_id} {index} {time.monotonic_ns()}\n"
            with self.log_lock:
                self.send_log.write(line)
        if response is None:
            sender.send(flags=flags)
        else:
            sender.send(response, flags=flags)

    def _serve(self, request, start):
        sender = request.get_response_sender()
        rid = request.request_id()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            max_tokens = int(_scalar(request, "max_tokens", 16))
            stream = bool(_scalar(request, "stream", True))
            plan = self._plan(max(max_tokens, 1))
            if self.slow_file and os.path.exists(self.slow_file):
                plan = [(offset * self.slow_factor, k, n) for offset, k, n in plan]
            if not stream:
                time.sleep(max(0.0, start + plan[-1][0] - time.monotonic()))
                drafted = self.draft_per_step * (len(plan) - 1)
                accepted = (self.tokens_per_step - 1) * (len(plan) - 1)
                response = self._response(0, max_tokens, drafted, accepted)
                self._send(sender, rid, 0, response, flags=final)
                return
            for i, (offset, first, n) in enumerate(plan):
                time.sleep(max(0.0, start + offset - time.monotonic()))
                drafted = 0 if i == 0 else self.draft_per_step
                accepted = 0 if i == 0 else n - 1
                last = i == len(plan) - 1 and not self.empty_final
                response = self._response(first, n, drafted, accepted)
                self._send(sender, rid, i, response, flags=final if last else 0)
            if self.empty_final:
                self._send(sender, rid, len(plan), flags=final)
        except Exception as exc:  # noqa: BLE001 - report any failure to the client
            sender.send(
                pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                flags=final,
            )

    def finalize(self):
        for _ in self.threads:
            self.queue.put(None)
        # One second for all of them: a worker still serving a request whose client went
        # away (a test that killed its load generator) would hold the unload (and the
        # server's stop) for its whole script; the threads are daemons and end with the stub.
        deadline = time.monotonic() + 1.0
        for thread in self.threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.send_log is not None:
            self.send_log.close()
