import os
import sys

from engine.cli import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
# Executor and gRPC threads of the finished program must not hold the process open.
os._exit(code)
