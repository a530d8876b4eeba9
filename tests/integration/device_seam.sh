#!/usr/bin/env bash
# The device seam's op list stands in one place (kernels/device_ops.def, docs/runtime.md): each op
# of the list is defined once in kernels/cpu/ and once in kernels/cuda/ (at most once, for an
# optional family's: the CPU has no collectives), declared nowhere (the
# declarations are made from the list), and named in none of the files that make the tables, the
# check and the declarations. A planted second list (an op declared by hand in a header) is found.
source "$(dirname "$0")/lib.sh"
check() {
  python3 - "$1" <<'PY'
import pathlib, re, sys

kernels = pathlib.Path(sys.argv[1])
listing = (kernels / "device_ops.def").read_text()
ops = re.findall(r"^TRAINCTL_OP\(\s*(\w+),\s*(\w+),", listing, re.M)
optional = set(re.findall(r"^TRAINCTL_FAMILY\(\s*(\w+),\s*\w+,\s*optional\)", listing, re.M))
sources = {path: path.read_text() for path in kernels.rglob("*")
           if path.is_file() and path.suffix in {".h", ".cpp", ".cu", ".cuh", ".inc"}}
generated_from_the_list = {"device.h", "device.cpp", "device_table.h", "device_table.inc",
                           "device_declarations.inc", "cpu_device.cpp", "cuda_device.cpp", "cpu_ops.h", "cuda_ops.h"}
problems = []
for family, op in ops:
    # A definition starts a line with its return type and has a body; a declaration ends in ';'.
    definition = re.compile(rf"^\w[\w:<>,* ]*[ *&]{op}\(([^;{{]*)\)\s*\{{", re.M)
    declaration = re.compile(rf"^\w[\w:<>,* ]*[ *&]{op}\(([^;{{]*)\)\s*;", re.M)
    for side in ("cpu", "cuda"):
        defined_in = [str(path) for path, text in sources.items() if path.parent.name == side and definition.search(text)]
        # A device may lack an optional family (the CPU has no collectives).
        if len(defined_in) > 1 or (not defined_in and family not in optional):
            problems.append(f"{family}.{op}: defined in {len(defined_in)} files of kernels/{side}/ (expected 1): {defined_in}")
    for path, text in sources.items():
        if declaration.search(text):
            problems.append(f"{family}.{op}: declared by hand in {path}; declarations come from device_ops.def")
        if path.name in generated_from_the_list and re.search(rf"(?<![\w.:>]){op}\b", text):
            problems.append(f"{family}.{op}: named in {path}, which is made from the list")
for problem in problems:
    print(problem)
print(f"{len(ops)} ops, {len(problems)} problems")
sys.exit(1 if problems else 0)
PY
}
check "$TRAINCTL_SOURCE_DIR/kernels" || fail "the op list is not in one place (above)"

# A second list planted in a copy: an op declared by hand in a header is found.
cp -r "$TRAINCTL_SOURCE_DIR/kernels" planted
printf '%s\n' '#pragma once' 'namespace trainctl::cpu {' 'void sum_squares(Stream stream, const float* x, int64_t n, double* sum);' '}' \
  >planted/cpu/planted_ops.h
if check planted >planted.txt; then fail "a hand-written declaration went unnoticed"; fi
grep -q "optimizer.sum_squares: declared by hand in planted/cpu/planted_ops.h" planted.txt ||
  fail "the planted declaration was not named: $(cat planted.txt)"
echo "PASS"
