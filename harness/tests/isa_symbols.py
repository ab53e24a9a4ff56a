#!/usr/bin/python3
"""harness/tests/isa_symbols.py: checks an object compiled above the build's baseline
(engine/core/ops_avx512.cc) for code the rest of the program could run by mistake; exit 1 naming
each offending symbol.

The linker keeps one copy of each inline function that several units define, from whichever unit
it meets first. A unit compiled for AVX-512 that defined such a function (a standard-library
template, the thread pool) for AVX-512 could thus hand AVX-512 code to a baseline caller, and an
AVX2 processor would stop on SIGILL. engine/kernels/isa_namespace.h keeps every kernel of such a
unit in a namespace of its own, and the unit includes everything else before it raises its target.
This checks the outcome: every function the object defines outside that namespace has no AVX-512
instruction (no zmm or mask register, no EVEX-only form, no xmm16-31 or ymm16-31).
    /usr/bin/python3 harness/tests/isa_symbols.py OBJECT NAMESPACE     (ctest -R isa_symbols)
"""
import re
import subprocess
import sys

AVX512 = re.compile(r"%zmm|%k[0-7]\b|\{1to\d+\}|%[xy]mm(1[6-9]|2\d|3[01])\b|"
                    r"\bv(movdq[au](8|16|32|64)|pternlog|perm[it]2|p?compress|p?expand|rndscale|"
                    r"range|fixupimm|getexp|getmant|scalef|rcp14|rsqrt14|cvtt?[ps][sd]2u|cvtu|"
                    r"[a-z]+(32x[248]|64x[24]))")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")


def offenders(disassembly, namespace):
    """(symbol, instruction) of every function outside `namespace` with an AVX-512 instruction."""
    found, name, inside = [], None, False
    for line in disassembly.splitlines():
        head = FUNCTION.match(line)
        if head:
            name = head.group(1)
            inside = f"::{namespace}::" in name or name.startswith(f"{namespace}::")
            continue
        if name and not inside and AVX512.search(line):
            found.append((name, line.strip()))
            name = None  # one line per function is enough
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: isa_symbols.py OBJECT NAMESPACE")
    obj, namespace = sys.argv[1], sys.argv[2]
    text = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", obj], check=True,
                          capture_output=True, text=True).stdout
    functions = sum(1 for line in text.splitlines() if FUNCTION.match(line))
    bad = offenders(text, namespace)
    for symbol, instruction in bad:
        print(f"{obj}: {symbol} is outside namespace {namespace} and has an AVX-512 instruction: "
              f"{instruction}")
    print(f"{functions} functions in {obj}; {len(bad)} outside namespace {namespace} with AVX-512 "
          "code")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
