"""Load tests: tiers of streamed requests against one served model, recorded and summarized.

Lives here: records/ (what one request leaves), workload/ (what is sent, when), stats/ (figures from records), clients/ (one per serving API), files/ (the CSVs a load test writes), driver/ (a tier run against one or many servers); no modules of its own.
May import: core.
"""
