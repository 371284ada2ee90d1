#!/usr/bin/env python3
"""Rebuild libretrokit.so with another SIMD clone list, for A/B timing on one machine (docs/performance.md "Session 59").

Usage, from the repository root after `make build`:
    python3 scripts/simd-clone-ab.py OUT_FOLDER '"avx2","default"'
    python3 scripts/simd-clone-ab.py OUT_FOLDER2 '"arch=x86-64-v3","default"'
then run any tool or scripts/simd-clone-microbench.cpp with LD_LIBRARY_PATH=OUT_FOLDER (it takes precedence over the
tools' RUNPATH). Only the files that use RETRO_SIMD_CLONES (nn/fast_math.h) are compiled again, with
-DRETRO_SIMD_CLONE_TARGETS=LIST and otherwise build/'s own command (compile_commands.json); the library is linked from
build/'s other objects by build/'s link command. Leaving "avx512f" out of the list runs an AVX2 form on an AVX-512 CPU.
"""
import json
import os
import shlex
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.path.join(root, 'build')
out, targets = os.path.abspath(sys.argv[1]), sys.argv[2]
files = subprocess.run(['grep', '-l', 'RETRO_SIMD_CLONES', '-r', 'lib', '--include=*.cpp'], cwd=root,
                       capture_output=True, text=True, check=True).stdout.split()
os.makedirs(out, exist_ok=True)
replaced = {}
for entry in json.load(open(os.path.join(build, 'compile_commands.json'))):
    source = os.path.relpath(entry['file'], root)
    if source not in files or 'retrokit.dir' not in entry['command']:
        continue
    args = shlex.split(entry['command'])
    at = args.index('-o')
    new_object = os.path.join(out, os.path.basename(args[at + 1]))
    replaced[args[at + 1]] = new_object
    args[at + 1] = new_object
    args.insert(1, '-DRETRO_SIMD_CLONE_TARGETS=' + targets)
    subprocess.run(args, cwd=entry['directory'], check=True)
    print('compiled', source, flush=True)
if len(replaced) != len(files):
    sys.exit('found %d of the %d files in build/compile_commands.json' % (len(replaced), len(files)))
link_file = os.path.join(build, 'CMakeFiles/retrokit.dir/link.txt')   # make's build folder
if os.path.exists(link_file):
    link = shlex.split(open(link_file).read())
else:   # a Ninja build folder: the last command ninja would run for the library is its link (": && c++ ... && :")
    commands = subprocess.run(['ninja', '-C', build, '-t', 'commands', 'libretrokit.so'], capture_output=True,
                              text=True, check=True).stdout.strip().splitlines()
    link = [a for a in shlex.split(commands[-1]) if a not in (':', '&&')]
link = [replaced.get(a, a) for a in link]
link[link.index('-o') + 1] = os.path.join(out, 'libretrokit.so')
subprocess.run(link, cwd=build, check=True)
print('linked', os.path.join(out, 'libretrokit.so'))
