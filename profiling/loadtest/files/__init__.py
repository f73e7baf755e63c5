"""The files a load test writes: requests.csv rows, summary and acceptance rows, rounds.csv.

Lives here: responses (a tier's records -> rows), outputs (the CSVs written), rounds_table (rounds.csv), schemas (their columns).
May import: core, profiling.loadtest.records, profiling.loadtest.workload, profiling.loadtest.stats, profiling.loadtest.clients.
"""
