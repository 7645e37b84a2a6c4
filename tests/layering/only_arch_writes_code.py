#!/usr/bin/env python3
"""Only arch/ spells instructions (Documentation/optprobes.md, "Arch verbs").

Generic layers (core, fprobe, kprobe, tracefs, tools, the public headers) ask arch/x86_64 to
prepare, arm and disarm detours, slots and sites, to read registers and to run the few
instructions C++ has no word for; they never spell an opcode or an instruction. This test
fails when a file there:
  - names the opcode constants of arch/x86_64/insn_bytes.h (INT3_INSN_OPCODE, ...) or the
    byte-producing helpers (make_jmp_rel32, fill_nops, the relocator, the site byte writers);
  - spells a one-byte opcode (int3 cc, call e8, jmp e9/eb, ret c3, nop 90) as a literal in
    any base: hex, octal, a character or string escape, or decimal where a byte goes (in a
    list of values, assigned, passed or cast to a byte);
  - spells an instruction's bytes in a list of values, a string's escapes or one wide
    literal (either byte order): multi-byte NOPs (0f 1f), endbr64, movabs to a register
    (movabs $imm64,%r11 is 49 bb), jumps and calls through a register or memory
    (jmp *%r11 is 41 ff e3), jcc rel32, ud2, syscall, int $3;
  - holds inline assembly that emits anything (an instruction or a data directive in the
    text) or is an assembly source (.S). A declaration's asm label (`asm("symbol")` after
    the declared name: the symbol the trampolines know it by) emits nothing.
Comments may talk about opcodes (they are removed first; string and character literals are
lexed, so a "//" inside a string hides nothing). So that the test can fail at all, the same
scan must find each kind in arch/x86_64's own code; tests/layering/fixtures plants each kind
in a copy of the tree and checks that this script fails on every one.

  only_arch_writes_code.py SOURCE_DIR
"""
import os
import re
import sys

GENERIC = ["core", "fprobe", "kprobe", "tracefs", "tools", "include"]
ARCH = "arch/x86_64"
EXTS = (".c", ".cc", ".cpp", ".h", ".hpp", ".S", ".s", ".inc")

NAMES = [
    (re.compile(r"\b[A-Z0-9]+_INSN_OPCODE\b"), "opcode constant"),
    (re.compile(r"\bmake_(?:jmp|call)_rel32\b"), "rel32 branch encoder"),
    (re.compile(r"\b(?:fill_nops|nop_bytes)\b"), "NOP encoder"),
    (re.compile(r"\brelocate_(?:one|insns)\b"), "instruction relocator"),
    (re.compile(r"\bsite_(?:jmp|nop)_bytes\b"), "site byte writer"),
]
OPCODES_1 = {0xCC: "int3", 0xE8: "call rel32", 0xE9: "jmp rel32", 0xEB: "jmp rel8",
             0xC3: "ret", 0x90: "nop"}
# Instruction byte sequences, as regular expressions over "xx xx xx " (lower-case hex).
OPCODES_N = [
    (re.compile(r"0f 1f "), "multi-byte nop"),
    (re.compile(r"f3 0f 1e f[ab] "), "endbr"),
    (re.compile(r"4[89a-f] b[89a-f] "), "movabs $imm64 to a register"),
    (re.compile(r"(?:4[1-9a-f] )?ff [de][0-7] "), "call/jmp through a register"),
    (re.compile(r"ff [12]5 "), "call/jmp through memory"),
    (re.compile(r"0f 8[0-9a-f] "), "jcc rel32"),
    (re.compile(r"0f 0b "), "ud2"),
    (re.compile(r"0f 05 "), "syscall"),
    (re.compile(r"cd 03 "), "int $3"),
]
BYTE_TYPES = {"uint8_t", "int8_t", "char", "byte", "u8", "__u8"}
BYTE_CALLS = {"push_back", "emplace_back", "memset", "put", "emit"}
# Inline assembly directives that emit nothing into the text.
ASM_QUIET = re.compile(r"^\.(?:symver|globl|global|weak|hidden|protected|type|size|set|equ|"
                       r"section|pushsection|popsection|previous|text|data|p2align|align|"
                       r"balign|cfi_\w+)\b")

TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>\bu8?R"(?P<delim>[^(\s]{0,16})\((?P<rawbody>.*?)\)(?P=delim)")
  | (?P<str>(?:\bu8|\bu|\bU|\bL)?"(?P<strbody>(?:\\.|[^"\\\n])*)")
  | (?P<chr>(?:\bu8|\bu|\bU|\bL)?'(?P<chrbody>(?:\\.|[^'\\\n])+)')
  | (?P<num>\b\d[\w']*(?:\.[\w']*)?)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<op>==|!=|<=|>=|->|::|[^\s\w])
  | (?P<nl>\n)
  | \s+
""", re.S | re.X)
ESCAPE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)", re.S)
SIMPLE_ESC = {"n": 10, "t": 9, "r": 13, "0": 0, "a": 7, "b": 8, "f": 12, "v": 11}


def int_value(text):
    """(value, base) of an integer literal, or None for anything else (a float)."""
    t = text.replace("'", "").rstrip("uUlLzZ")
    try:
        if t[:2] in ("0x", "0X"):
            return int(t[2:], 16), 16
        if t[:2] in ("0b", "0B"):
            return int(t[2:], 2), 2
        if len(t) > 1 and t[0] == "0":
            return int(t, 8), 8
        return int(t, 10), 10
    except ValueError:
        return None


def unescape(body):
    """The bytes of a string literal's body, each with whether an escape spelled it."""
    out = []
    pos = 0
    for m in ESCAPE.finditer(body):
        for ch in body[pos:m.start()].encode():
            out.append((ch, False))
        e = m.group(1)
        if e[0] == "x":
            out.append((int(e[1:], 16) & 0xFF, True))
        elif e[0] in "01234567":
            out.append((int(e, 8) & 0xFF, True))
        else:
            out.append((SIMPLE_ESC.get(e, ord(e[0]) & 0xFF), e in SIMPLE_ESC))
        pos = m.end()
    for ch in body[pos:].encode():
        out.append((ch, False))
    return out


def hexs(bs):
    return "".join("%02x " % b for b in bs)


def lex(text):
    """Tokens (kind, text, value, line) of C, C++ or assembly source, comments dropped."""
    line = 1
    toks = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup if m.lastgroup not in ("delim", "rawbody", "strbody", "chrbody") \
            else None
        g = m.group(0)
        if m.group("comment") is not None:
            pass
        elif m.group("raw") is not None:
            toks.append(("str", g, [(b, False) for b in m.group("rawbody").encode()], line))
        elif m.group("str") is not None:
            toks.append(("str", g, unescape(m.group("strbody")), line))
        elif m.group("chr") is not None:
            bs = unescape(m.group("chrbody"))
            toks.append(("chr", g, bs[-1][0] if bs else 0, line))
        elif m.group("num") is not None:
            toks.append(("num", g, int_value(g), line))
        elif m.group("ident") is not None:
            toks.append(("ident", g, None, line))
        elif m.group("op") is not None:
            toks.append(("op", g, None, line))
        del kind
        line += g.count("\n")
    return toks


def byte_context(toks, i):
    """Whether the literal at toks[i] stands where a byte goes: in a list, assigned, passed
    to a byte writer or cast to a byte type."""
    prev = toks[i - 1] if i else None
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    if prev and prev[1] in ("=", "{") or nxt and nxt[1] == "," and prev and prev[1] in (",", "{"):
        return True
    if prev and prev[1] == ",":
        return True
    if prev and prev[1] == "(" and i >= 2:
        before = toks[i - 2][1]
        return before in BYTE_TYPES or before in BYTE_CALLS or before == ">"
    if prev and prev[1] == ")" and i >= 2 and toks[i - 2][1] in BYTE_TYPES:
        return True
    return False


def scan_tokens(toks):
    """(line, what, text) for every instruction spelled in the tokens."""
    hits = []
    run = []  # consecutive byte-sized values separated by commas: [(value, line, text)]

    def end_run():
        if len(run) >= 2:
            s = hexs(v for v, _, _ in run)
            for rx, what in OPCODES_N:
                m = rx.search(s)
                if m:
                    k = m.start() // 3
                    hits.append((run[k][1], what, ", ".join(t for _, _, t in run[k:k + 4])))
        run.clear()

    for i, (kind, text, value, line) in enumerate(toks):
        if kind in ("num", "chr"):
            if kind == "num":
                if value is None:
                    end_run()
                    continue
                v, base = value
            else:
                v, base = value, 0
            if v <= 0xFF:
                if v in OPCODES_1 and (base != 10 or byte_context(toks, i)):
                    hits.append((line, "%s opcode literal" % OPCODES_1[v], text))
                if run and (i < 2 or toks[i - 1][1] != ","):
                    end_run()
                run.append((v, line, text))
                continue
            end_run()
            if base == 16:
                digits = text[2:].replace("'", "").rstrip("uUlLzZ")
                n = (len(digits) + 1) // 2
                le = v.to_bytes(n, "little")
                for bs in (le, le[::-1]):
                    for rx, what in OPCODES_N:
                        if rx.search(hexs(bs)):
                            hits.append((line, "%s in a wide literal" % what, text))
            continue
        if kind == "op" and text == ",":
            continue
        end_run()
        if kind == "str":
            bs = value
            s = hexs(b for b, _ in bs)
            for k, (b, esc) in enumerate(bs):
                if esc and b in OPCODES_1:
                    hits.append((line, "%s opcode in a string" % OPCODES_1[b], text))
            for rx, what in OPCODES_N:
                for m in rx.finditer(s):
                    a, z = m.start() // 3, m.end() // 3
                    if any(esc for _, esc in bs[a:z]):
                        hits.append((line, "%s in a string" % what, text))
    end_run()
    return hits


# Words after which `asm(...)` is a statement, not a declaration's label.
STATEMENT_WORDS = {"else", "do", "return", "case", "default", "goto"}


def k_is_symbol(toks, j):
    """Whether the asm at toks[j] ('(') holds one string that is a symbol name, then ')'."""
    return (j + 2 < len(toks) and toks[j + 1][0] == "str" and toks[j + 2][1] == ")" and
            re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.$]*",
                         bytes(b for b, _ in toks[j + 1][2]).decode(errors="replace")) is not None)


def asm_hits(toks):
    """Inline assembly that emits something: asm("...") / __asm__ volatile(...)."""
    hits = []
    for i, (kind, text, _, line) in enumerate(toks):
        if kind != "ident" or text not in ("asm", "__asm__", "__asm"):
            continue
        j = i + 1
        while j < len(toks) and toks[j][1] in ("volatile", "__volatile__", "goto", "inline"):
            j += 1
        if j >= len(toks) or toks[j][1] != "(":
            continue
        # A declaration's asm label (`extern int v asm("sym");`, after the declarator's
        # name or array bound) names the symbol and emits nothing; a statement's asm (after
        # `;`, a brace, `)` or a keyword) is checked whatever it holds.
        prev = toks[i - 1] if i else None
        label = (j == i + 1 and prev is not None and
                 ((prev[0] == "ident" and prev[1] not in STATEMENT_WORDS) or prev[1] == "]"))
        if label and k_is_symbol(toks, j):
            continue
        # The template: the string literals right after the parenthesis (a register
        # variable's asm("r10") names a register: x86 too).
        body = ""
        k = j + 1
        while k < len(toks) and toks[k][0] == "str":
            body += bytes(b for b, _ in toks[k][2]).decode(errors="replace")
            k += 1
        for stmt in re.split(r"[;\n]", body):
            stmt = stmt.strip()
            if stmt and not ASM_QUIET.match(stmt):
                hits.append((line, "inline assembly", stmt))
                break
    return hits


def scan_file(path):
    with open(path, errors="replace") as fh:
        text = fh.read()
    hits = []
    if path.endswith((".S", ".s")):
        hits.append((1, "assembly source", os.path.basename(path)))
        # The preprocessor's lines and '#' comments are not code.
        text = re.sub(r"(?m)^\s*#[^\n]*", "", text)
    toks = lex(text)
    code_lines = {}
    for kind, t, _, line in toks:
        if kind in ("ident", "num"):
            code_lines.setdefault(line, []).append(t)
    for line, words in code_lines.items():
        joined = " ".join(words)
        for rx, what in NAMES:
            m = rx.search(joined)
            if m:
                hits.append((line, what, m.group(0)))
    hits += scan_tokens(toks)
    hits += asm_hits(toks)
    return sorted(set(hits))


def scan(root, top):
    hits = []
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in sorted(files):
            if f.endswith(EXTS):
                path = os.path.join(d, f)
                for line, what, text in scan_file(path):
                    hits.append((os.path.relpath(path, root), line, what, text))
    return hits


def main():
    root = sys.argv[1]
    bad = []
    for top in GENERIC:
        bad += scan(root, top)
    for path, n, what, text in bad:
        print(f"{path}:{n}: {what} '{text}' outside arch/")
    if bad:
        print("generic code asks arch verbs for instructions: arch/x86_64/detour.h, "
              "kprobes_arch.h, ftrace_make.h, text_patching.h, ptrace.h's accessors "
              "(Documentation/optprobes.md)")
    # The scan must see arch's own code, or this test could never fail.
    arch_hits = {what for _, _, what, _ in scan(root, ARCH)}
    for want in ("opcode constant", "rel32 branch encoder", "instruction relocator",
                 "int3 opcode literal", "jmp rel32 opcode literal", "multi-byte nop",
                 "movabs $imm64 to a register", "inline assembly", "assembly source"):
        if want not in arch_hits:
            print(f"the scan finds no {want} in {ARCH}: the test has gone blind")
            bad.append(want)
    if bad:
        sys.exit(1)
    print(f"ok: no instruction spelled outside {ARCH} "
          f"({', '.join(GENERIC)} scanned; arch matches: {len(arch_hits)} kinds)")


if __name__ == "__main__":
    main()
