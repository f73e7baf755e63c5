"""Click commands, one module per command family; each parses and calls one library function."""
