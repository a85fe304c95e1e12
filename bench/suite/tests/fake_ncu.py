#!/usr/bin/env python3
"""A stand-in for Nsight Compute in the IO report's tests: runs the
application it is given, writes a report file, and on --import prints a raw
CSV page with two kernels. FAKE_NCU_BROKEN=1 acts like an ncu that cannot
read the counters."""

import os
import subprocess
import sys

args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 0.0 (test stand-in)")
    sys.exit(0)
if "--import" in args:
    if os.environ.get("FAKE_NCU_BROKEN"):
        sys.exit(1)
    print('"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum"')
    print('"","","byte","byte"')
    print('"0","matmul","3000000000","1000000000"')
    print('"1","softmax","500000000","500000000"')
    sys.exit(0)
for flag, value in (("--clock-control", "none"), ("--profile-from-start", "off")):
    if args[args.index(flag) + 1] != value:
        sys.exit(f"fake ncu: expected {flag} {value}")
report = args[args.index("--export") + 1]
app = args[args.index("--export") + 2:]
if os.environ.get("FAKE_NCU_BROKEN"):
    print("==ERROR== Failed to initialize the profiler: LibraryNotLoaded")
else:
    open(report + ".ncu-rep", "w").write("fake")
sys.exit(subprocess.run(app).returncode)
