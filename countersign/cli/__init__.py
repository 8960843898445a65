"""The `countersign` command line: one module per command group, each parsing options, calling a service or the
root's wiring, and printing. The top floor: nothing imports it.
"""
