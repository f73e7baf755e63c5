"""Child process that builds one engine of a plan: ``python -m trtbench.builders.trtllm.worker
PLAN_JSON ROLE`` (started by :func:`trtbench.builders.trtllm.run.run_step`; NGC image only).

It materializes the plan's calls with the real TensorRT-LLM classes: for Medusa, the per-rank
``MedusaForCausalLm.from_hugging_face(...).save_checkpoint(...)``; then ``LLM(...)``,
``llm.save(engine_dir)`` and ``llm.shutdown()``. Everything it and TensorRT-LLM print goes to
the parent, which streams it into build.log. A failure is an uncaught exception: traceback in the
log, non-zero exit status.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from trtbench.builders.trtllm.calls import materialize
from trtbench.builders.trtllm.contract import load_contract
from trtbench.builders.trtllm.plan import EngineStep, VariantPlan
from trtbench.builders.trtllm.run import require_trtllm

logger = logging.getLogger("trtbench.builders.trtllm.worker")


def build_engine(step: EngineStep) -> None:
    """Convert (Medusa) and build one engine as the plan says (GPU + tensorrt_llm needed)."""
    contract = load_contract()
    version = require_trtllm(contract)
    logger.info(f"TensorRT-LLM {version}; engine {step.role} -> {step.engine_dir}")
    if step.convert is not None and step.checkpoint_dir is not None:
        for rank in range(step.world_size):
            logger.info(f"converting checkpoint rank {rank}/{step.world_size}")
            model = materialize(step.convert, contract.imports, rank)
            model.save_checkpoint(step.checkpoint_dir, save_config=(rank == 0))
    logger.info("building (LLM API)")
    llm = materialize(step.llm, contract.imports)
    try:
        logger.info("saving the engine")
        llm.save(step.engine_dir)
    finally:
        llm.shutdown()
    logger.info("done")


def main(argv: list[str]) -> None:
    """``argv`` = [PLAN_JSON, ROLE]; logs to stdout, which the parent streams to build.log."""
    logging.basicConfig(
        stream=sys.stdout,
        level=logging.INFO,
        format="[trtbench-worker %(asctime)s] %(message)s",
    )
    plan_path, role = Path(argv[0]), argv[1]
    plan = VariantPlan.from_json(json.loads(plan_path.read_text()))
    step = next(e for e in plan.engines if e.role == role)
    build_engine(step)


if __name__ == "__main__":
    main(sys.argv[1:])
