#!/usr/bin/env bash
# The d = 1000 experiments timed on a CUDA machine (the device check of the developers' brief), one script so
# that it runs in one lease.  Run from the repository root; writes its tables to stdout and, where $OUT is set,
# to $OUT/device_d1000.txt.  Needs python3 with torch (CUDA), numpy, scipy, numba; the package from src/.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
log=${OUT:-/tmp}/device_d1000.txt
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, numpy, numba; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'numpy', numpy.__version__, 'numba', numba.__version__, 'cpu threads', torch.get_num_threads())"
  echo "== CUDA against CPU: the package's own test"
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_simulation.py -k cuda 2>&1 | tail -3
  echo "== optimisers at d = 1000 on the GPU (alpha 2, GD 5000 steps and L-BFGS, both inits)"
  timeout 400 python3 benchmarks/simulation.py --parts optimizers --device cuda --d 1000
  echo "== the same on this machine's CPU cores"
  timeout 400 python3 benchmarks/simulation.py --parts optimizers --device cpu --d 1000
  echo "== whole process: attnphase simulate --d 1000 --alpha 2, GPU then CPU"
  timeout 300 python3 benchmarks/simulation.py --parts process --process-device cuda
  timeout 300 python3 benchmarks/simulation.py --parts process --process-device cpu
  echo "== 8 seeds at d = 1000, L-BFGS, float64 and float32 on the GPU"
  for dt in float64 float32; do
    TIMEFORMAT="seeds 0:8, $dt, whole command: %R s wall"
    time (timeout 300 python3 -m attnphase simulate --d 1000 --alpha 2 --seeds 0:8 --optimizer lbfgs \
      --device cuda --dtype $dt --quiet --csv | cut -c1-160)
  done
} 2>&1 | tee "$log"
