"""The ctypes layer matches include/tickgate.h: every function, struct, enum and constant."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import tickgate
from tickgate import _ffi
from conftest import HEADER, REPO


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


HEADER_TEXT = _strip_comments(HEADER.read_text())
VERSION_TEXT = _strip_comments((HEADER.parent / "tickgate_version.h").read_text())
STATUS_TEXT = _strip_comments((HEADER.parent / "tickgate_status.h").read_text())
# Declarations only: preprocessor lines (with their continuations) removed.
DECLARATIONS = "\n".join(
    line for line in HEADER_TEXT.replace("\\\n", " ").splitlines() if not line.lstrip().startswith("#")
)


def header_functions() -> Dict[str, Tuple[str, List[str]]]:
    """name -> (return type, [parameter declarations]) of every tg_ function."""
    found: Dict[str, Tuple[str, List[str]]] = {}
    # A declaration: a return type, the name, a parameter list, a semicolon;
    # not a typedef (function-pointer types) and not a macro.
    for statement in re.split(r"[;{}]", DECLARATIONS):
        m = re.fullmatch(r"\s*([A-Za-z_][\w \t\n\*]*?)\b(tg_\w+)\s*\(([^()]*)\)\s*", statement)
        if m is None:
            continue
        rtype, name, params = m.group(1).strip(), m.group(2), m.group(3)
        if rtype.startswith("typedef") or not rtype:
            continue
        plist = [p.strip() for p in " ".join(params.split()).split(",")]
        if plist == ["void"]:
            plist = []
        found[name] = (" ".join(rtype.split()), plist)
    return found


FUNCTIONS = header_functions()


def test_header_parse_sees_the_api() -> None:
    # Guard the parser itself: a regex that finds nothing would make the
    # checks below vacuous.
    for name in ("tg_version", "tg_engine_open", "tg_subscribe", "tg_countdown_list", "tg_unsubscribe"):
        assert name in FUNCTIONS
    assert FUNCTIONS["tg_engine_close"] == ("tg_status", ["tg_engine *engine"])
    assert FUNCTIONS["tg_version"] == ("uint32_t", [])
    assert "tg_event_fn" not in FUNCTIONS  # a typedef, not a function


def test_every_header_function_is_declared() -> None:
    missing = sorted(set(FUNCTIONS) - set(_ffi.FUNCTIONS))
    assert not missing, f"functions of tickgate.h without a ctypes declaration in _ffi: {missing}"
    extra = sorted(set(_ffi.FUNCTIONS) - set(FUNCTIONS))
    assert not extra, f"_ffi declares functions the header does not have: {extra}"


_C_TYPES = {
    "tg_status": _ffi.tg_status,
    "tg_store_failure": _ffi.tg_store_failure,
    "void": None,
    "uint32_t": ctypes.c_uint32,
    "const char *": ctypes.c_char_p,
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_declaration_matches_header(name: str) -> None:
    rtype, params = FUNCTIONS[name]
    restype, argtypes = _ffi.FUNCTIONS[name]
    assert len(argtypes) == len(params), f"{name}: header has {len(params)} parameters {params}, _ffi {len(argtypes)}"
    assert restype is _C_TYPES[rtype], f"{name}: header returns {rtype}, _ffi {restype}"
    # Pointers in the header are pointers (or c_char_p / function pointers / c_void_p) in _ffi.
    for decl, argtype in zip(params, argtypes):
        is_pointer = "*" in decl
        c_is_pointer = (
            argtype in (ctypes.c_char_p, ctypes.c_void_p)
            or issubclass(argtype, ctypes._Pointer)
            or issubclass(argtype, ctypes._CFuncPtr)  # type: ignore[attr-defined]
        )
        is_callback = re.search(r"\btg_\w+_fn\b", decl) is not None
        assert is_pointer or is_callback or decl.startswith("tg_engine") == c_is_pointer, (name, decl, argtype)
        if is_pointer or is_callback:
            assert c_is_pointer, f"{name}: {decl!r} is a pointer in C but {argtype} in _ffi"
        else:
            assert not c_is_pointer, f"{name}: {decl!r} is a value in C but {argtype} in _ffi"
            size = ctypes.sizeof(argtype)
            if "int64_t" in decl or decl.startswith(("tg_subscription", "tg_ticket", "tg_request")):
                assert size == 8, (name, decl, argtype)
            elif decl.startswith(("int ", "tg_status", "tg_send_outcome", "tg_cancel_reason")):
                assert size == 4, (name, decl, argtype)


def test_loaded_functions_have_prototypes() -> None:
    lib = _ffi.library()
    for name, (restype, argtypes) in _ffi.FUNCTIONS.items():
        func = getattr(lib, name)
        assert func.argtypes == list(argtypes), name
        assert func.restype is restype, name
        if restype is _ffi.tg_status:
            assert func.errcheck is not None, f"{name} returns tg_status but has no errcheck"


def test_library_exports_only_header_functions() -> None:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm to list the library's exported symbols")
    lib = Path(tickgate.load_library().path).resolve()
    out = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-2:-1] == ["T"]}
    assert exported == set(_ffi.FUNCTIONS), (
        f"exported but not declared: {sorted(exported - set(_ffi.FUNCTIONS))}; "
        f"declared but not exported: {sorted(set(_ffi.FUNCTIONS) - exported)}"
    )


# ---------------------------------------------------------------------------
# Enums and constants
# ---------------------------------------------------------------------------

ENUMS = {
    "tg_status": tickgate.Status,
    "tg_store_failure": tickgate.StoreFailure,
    "tg_delivery": tickgate.Delivery,
    "tg_clock_kind": tickgate.ClockKind,
    "tg_event_kind": tickgate.EventKind,
    "tg_button_state": tickgate.ButtonState,
    "tg_send_outcome": tickgate.SendOutcome,
    "tg_cancel_reason": tickgate.CancelReason,
    "tg_require_result": tickgate.RequireResult,
    "tg_gate_event_kind": tickgate.GateEventKind,
    "tg_guard_mode": tickgate.GuardMode,
    "tg_code_outcome": tickgate.CodeOutcome,
}
ENUM_PREFIX = {
    "tg_status": "TG_",
    "tg_store_failure": "TG_STORE_FAILURE_",
    "tg_delivery": "TG_DELIVERY_",
    "tg_clock_kind": "TG_CLOCK_",
    "tg_event_kind": "TG_EVENT_",
    "tg_button_state": "TG_BUTTON_",
    "tg_send_outcome": "TG_SEND_",
    "tg_cancel_reason": "TG_CANCEL_",
    "tg_require_result": "TG_REQUIRE_",
    "tg_gate_event_kind": "TG_GATE_",
    "tg_guard_mode": "TG_GUARD_",
    "tg_code_outcome": "TG_OUTCOME_",
}
# Members the package writes otherwise: a decision record's outcome is None.
ENUM_NOT_MEMBERS = {"tg_code_outcome": {"NONE"}}


def map_entries(macro: str) -> Dict[str, int]:
    """NAME -> VALUE of the XX(NAME, VALUE, ...) entries of an X-macro table of tickgate_status.h."""
    m = re.search(rf"#define\s+{macro}\(XX\)(.*?)(?:\n\s*\n|#endif)", STATUS_TEXT.replace("\\\n", " "), flags=re.S)
    assert m is not None, f"no table {macro} in tickgate_status.h"
    return {e.group(1): int(e.group(2)) for e in re.finditer(r"XX\(\s*(TG_\w+)\s*,\s*(-?\d+)", m.group(1))}


def header_enums() -> Dict[str, Dict[str, int]]:
    enums = {}
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", HEADER_TEXT, flags=re.S):
        # An enum expanded from a table (TG_STATUS_MAP(...)) has the table's values.
        table = re.search(r"\b(TG_\w+_MAP)\(", m.group(2))
        if table:
            enums[m.group(3)] = map_entries(table.group(1))
            continue
        values = {}
        for e in re.finditer(r"(TG_\w+)\s*=\s*(-?\d+)", m.group(2)):
            values[e.group(1)] = int(e.group(2))
        enums[m.group(3)] = values
    return enums


def test_every_header_enum_has_an_intenum() -> None:
    enums = header_enums()
    assert "tg_status" in enums and "tg_event_kind" in enums  # the parser works
    assert enums["tg_status"]["TG_E_STORE_UNKNOWN"] == 20 and enums["tg_status"]["TG_OK"] == 0
    assert len(enums["tg_store_failure"]) == 9
    assert set(enums) == set(ENUMS), f"enums of the header vs the package: {sorted(enums)} vs {sorted(ENUMS)}"


@pytest.mark.parametrize("c_name", sorted(ENUMS))
def test_enum_values_match_header(c_name: str) -> None:
    values = header_enums()[c_name]
    prefix = ENUM_PREFIX[c_name]
    want = {name[len(prefix):]: value for name, value in values.items()
            if name[len(prefix):] not in ENUM_NOT_MEMBERS.get(c_name, set())}
    got = {member.name: int(member) for member in ENUMS[c_name]}
    assert got == want


def test_numeric_defines_match() -> None:
    defines = {}
    for m in re.finditer(r"#define\s+(TG_\w+)\s+(?:INT64_C\()?(0x[0-9A-Fa-f]+|\d+)u?\)?\s*$", HEADER_TEXT, flags=re.M):
        defines[m.group(1)] = int(m.group(2), 0)
    assert {"TG_KEY_MAX_BYTES", "TG_DURATION_MAX_MS", "TG_START_RESTART"} <= set(defines)
    for name, value in defines.items():
        assert getattr(_ffi, name, None) == value, f"{name}: header {value}, _ffi {getattr(_ffi, name, None)}"
    version = {}
    for m in re.finditer(r"#define\s+TG_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)\s*$", VERSION_TEXT, flags=re.M):
        version[m.group(1)] = int(m.group(2))
        assert getattr(_ffi, f"TG_VERSION_{m.group(1)}") == int(m.group(2))
    assert len(version) == 3
    assert _ffi.TG_VERSION_STRING == "{MAJOR}.{MINOR}.{PATCH}".format(**version)


def test_version_check_values() -> None:
    lib = _ffi.library()
    assert lib.tg_version() >> 16 == _ffi.TG_VERSION_MAJOR == tickgate.EXPECTED_MAJOR
    assert tickgate.library_version() == "{}.{}.{}".format(
        lib.tg_version() >> 16, (lib.tg_version() >> 8) & 0xFF, lib.tg_version() & 0xFF
    )


# ---------------------------------------------------------------------------
# Structs: sizes and offsets against a C compiler
# ---------------------------------------------------------------------------

STRUCTS = {
    "tg_engine_options": _ffi.tg_engine_options,
    "tg_event": _ffi.tg_event,
    "tg_countdown_info": _ffi.tg_countdown_info,
    "tg_policy": _ffi.tg_policy,
    "tg_titles": _ffi.tg_titles,
    "tg_button": _ffi.tg_button,
    "tg_gate_event": _ffi.tg_gate_event,
    "tg_budget": _ffi.tg_budget,
    "tg_budget_key": _ffi.tg_budget_key,
    "tg_budget_usage": _ffi.tg_budget_usage,
    "tg_guard": _ffi.tg_guard,
    "tg_number_info": _ffi.tg_number_info,
    "tg_guard_record": _ffi.tg_guard_record,
    "tg_stats": _ffi.tg_stats,
}


def test_every_header_struct_has_a_ctypes_struct() -> None:
    names = set(re.findall(r"typedef\s+struct\s+(\w+)\s*\{", HEADER_TEXT))
    assert "tg_event" in names
    assert names == set(STRUCTS), f"header structs {sorted(names)} vs _ffi {sorted(STRUCTS)}"


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, int]:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) to measure the header's struct layout")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <tickgate.h>", "int main(void) {"]
    for cname, struct in STRUCTS.items():
        lines.append(f'    printf("{cname} %zu\\n", sizeof({cname}));')
        for field, _ in struct._fields_:
            lines.append(f'    printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
    lines += ["    return 0;", "}"]
    d = tmp_path_factory.mktemp("layout")
    src, exe = d / "layout.c", d / "layout"
    src.write_text("\n".join(lines) + "\n")
    build = subprocess.run([cc, "-std=c99", "-I", str(REPO / "include"), str(src), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, f"the layout program does not compile against tickgate.h:\n{build.stderr}"
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


@pytest.mark.parametrize("cname", sorted(STRUCTS))
def test_struct_layout_matches_c(cname: str, c_layout: Dict[str, int]) -> None:
    struct = STRUCTS[cname]
    assert ctypes.sizeof(struct) == c_layout[cname], f"sizeof({cname})"
    for field, _ in struct._fields_:
        assert getattr(struct, field).offset == c_layout[f"{cname}.{field}"], f"offsetof({cname}, {field})"


def test_library_struct_sizes_match() -> None:
    lib = _ffi.library()
    options = _ffi.tg_engine_options()
    lib.tg_engine_options_init(ctypes.byref(options), ctypes.sizeof(options))
    assert options.struct_size == ctypes.sizeof(_ffi.tg_engine_options)
    policy = _ffi.tg_policy()
    lib.tg_policy_init(ctypes.byref(policy), ctypes.sizeof(policy))
    assert policy.struct_size == ctypes.sizeof(_ffi.tg_policy)


def test_event_struct_size_from_library(host_engine: tickgate.Engine) -> None:
    # A raw callback (not the package's trampoline) reads struct_size.
    sizes: List[int] = []

    @_ffi.tg_event_fn
    def raw(event, user_data):  # type: ignore[no-untyped-def]
        sizes.append(event.contents.struct_size)

    sub = _ffi.tg_subscription()
    lib = _ffi.library()
    lib.tg_subscribe(host_engine.handle, b"s", b"k", raw, None, _ffi.tg_destroy_fn(), ctypes.byref(sub))
    host_engine.dispatch()
    lib.tg_unsubscribe(host_engine.handle, sub.value)
    assert sizes and all(s >= ctypes.sizeof(_ffi.tg_event) for s in sizes)
