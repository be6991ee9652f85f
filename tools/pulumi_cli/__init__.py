"""Running stacks with the real Pulumi CLI (the one tools/pulumi-cli/setup.sh provides in build/pulumi/bin).

Tests, the demo and the benchmarks use it as operators run the CLI: `pulumi preview --json`, `pulumi up
--yes` (a preview first), `refresh`, `destroy`, `cancel`, `stack export|import`, against a `file://`
backend, offline (no update check, no plugin download). A program runs as an Automation API inline
program (the Python language host cannot be had here: docs/pulumi-cli.md), served to the CLI over
`--client` from a runner process per operation. Modules: `install` (where the CLI is, its offline
environment), `results` (what an operation returns, read from the CLI's engine events), `runner` (the
per-operation process), `api` (`Engine`, the Python API).
"""
