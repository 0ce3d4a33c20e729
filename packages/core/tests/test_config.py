"""Tests of opgraph.configparser and opgraph.configdefaults (OPGRAPH_FLAGS, rc files, flags)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opgraph import configdefaults, configparser
from opgraph.configdefaults import add_core_flags
from opgraph.configparser import (
    BoolParam,
    Config,
    DeviceParam,
    FloatParam,
    IntParam,
    PathParam,
    StrParam,
    parse_flags_string,
)

CORE_SRC = Path(configparser.__file__).resolve().parents[1]


def core_config(flags: str = "", rc_paths=()) -> Config:
    """A fresh Config with core's flags, independent of the process environment."""
    cfg = Config(flags, rc_paths)
    add_core_flags(cfg)
    return cfg


def write_rc(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------- OPGRAPH_FLAGS parsing


def test_parse_flags_string_whitespace_empty_items_dots_and_last_wins():
    parsed = parse_flags_string(" floatX = float32 ,, gcc.cxxflags=-O3 -DX=1, ,floatX=float16,")
    assert parsed == {"floatX": "float16", "gcc__cxxflags": "-O3 -DX=1"}


def test_parse_flags_string_empty():
    assert parse_flags_string("") == {}
    assert parse_flags_string(" , ,") == {}


@pytest.mark.parametrize("flags", ["floatX", "floatX=float32,profile", "=3"])
def test_bare_name_is_an_error(flags):
    with pytest.raises(ValueError, match="not of the form name=value"):
        Config(flags)


def test_flags_string_sets_values_and_dotted_names():
    cfg = core_config("floatX=float32, traceback.limit=3 ,DebugMode.check_c=no")
    assert cfg.floatX == "float32"
    assert cfg.traceback__limit == 3
    assert cfg.DebugMode__check_c is False
    assert cfg.source("floatX") == "OPGRAPH_FLAGS"
    assert cfg.source("optimizer") == "default"


def test_section_attribute_access_like_theano():
    cfg = core_config("traceback.limit=5")
    assert cfg.traceback.limit == 5
    cfg.traceback.limit = 2
    assert cfg.traceback__limit == 2
    with pytest.raises(AttributeError, match="Unknown opgraph flag 'traceback__limt'"):
        cfg.traceback.limt  # noqa: B018


# ----------------------------------------------------------------- rc files and priority


def test_rc_file_global_and_sections(tmp_path):
    rc = write_rc(
        tmp_path / "rc",
        "[global]\nfloatX = float32\ndevice = cuda1\n\n"
        "[traceback]\nlimit = 12\n\n[NanGuardMode]\nbig_is_error = True\n",
    )
    cfg = core_config(rc_paths=[rc])
    assert cfg.floatX == "float32"  # key case preserved
    assert cfg.device == "cuda1"
    assert cfg.traceback__limit == 12
    assert cfg.NanGuardMode__big_is_error is True
    assert cfg.source("floatX") == f"rc file {rc}"


def test_rc_missing_files_skipped_and_later_files_win(tmp_path):
    first = write_rc(tmp_path / "a", "[global]\nfloatX = float32\nprofile = yes\n")
    second = write_rc(tmp_path / "b", "[global]\nfloatX = float16\n")
    cfg = core_config(rc_paths=[tmp_path / "missing", first, second])
    assert cfg.floatX == "float16"
    assert cfg.profile is True


def test_malformed_rc_file_names_the_path(tmp_path):
    rc = write_rc(tmp_path / "bad", "floatX = float32\n")  # no section header
    with pytest.raises(ValueError, match=r"Cannot parse opgraph rc file .*bad"):
        Config(rc_paths=[rc])


def test_priority_assignment_over_flags_over_rc_over_default(tmp_path):
    rc = write_rc(tmp_path / "rc", "[global]\nfloatX = float16\nprofile = true\n")
    cfg = core_config("floatX=float32", [rc])
    assert cfg.floatX == "float32"  # OPGRAPH_FLAGS beats rc
    assert cfg.profile is True  # rc beats default
    assert cfg.allow_gc is True  # default
    cfg.floatX = "float64"
    assert cfg.floatX == "float64"  # assignment beats all
    assert cfg.source("floatX") == "set"
    with cfg.change_flags(floatX="float16"):
        assert cfg.floatX == "float16"
    assert cfg.floatX == "float64"


def test_from_environment_reads_flags_and_opgraphrc_list(tmp_path):
    a = write_rc(tmp_path / "a", "[global]\nfloatX = float16\nprofile = 1\n")
    b = write_rc(tmp_path / "b", "[global]\nprofile = 0\n")
    environ = {"OPGRAPH_FLAGS": "floatX=float32", "OPGRAPHRC": os.pathsep.join([str(a), str(b)])}
    cfg = Config.from_environment(environ)
    add_core_flags(cfg)
    assert cfg.floatX == "float32"
    assert cfg.profile is False


def test_from_environment_default_rc_is_home_opgraphrc(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    write_rc(tmp_path / ".opgraphrc", "[global]\nfloatX = float32\n")
    cfg = Config.from_environment({})
    add_core_flags(cfg)
    assert cfg.floatX == "float32"


# ----------------------------------------------------------------- change_flags


def test_change_flags_context_manager_restores():
    cfg = core_config()
    with cfg.change_flags(floatX="float32", profile="yes") as changer:
        assert (cfg.floatX, cfg.profile) == ("float32", True)
        assert changer.changes == {"floatX": "float32", "profile": True}
    assert (cfg.floatX, cfg.profile) == ("float64", False)
    assert cfg.source("floatX") == "default"


def test_change_flags_decorator_and_reuse():
    cfg = core_config()
    seen = []

    @cfg.change_flags(floatX="float32")
    def build(depth: int) -> str:
        """Docstring kept."""
        seen.append(cfg.floatX)
        if depth:
            build(depth - 1)
        return cfg.floatX

    assert build(2) == "float32"
    assert seen == ["float32"] * 3
    assert cfg.floatX == "float64"
    assert build.__doc__ == "Docstring kept."


def test_change_flags_on_a_flag_never_read_before_leaves_it_readable():
    """A flag first read inside change_flags goes back to unset on exit, and the hot-path
    reader (``current``) then gives its default instead of a KeyError."""
    cfg = core_config()
    with cfg.change_flags(floatX="float32"):
        assert cfg.current("floatX") == "float32"
    assert cfg.current("floatX") == "float64"
    assert cfg.floatX == "float64"
    assert cfg.source("floatX") == "default"


def test_change_flags_restores_after_exception():
    cfg = core_config()
    cfg.floatX = "float16"
    with pytest.raises(RuntimeError), cfg.change_flags(floatX="float32"):
        raise RuntimeError("boom")
    assert cfg.floatX == "float16"
    assert cfg.source("floatX") == "set"


def test_change_flags_nested_and_dotted_dict():
    cfg = core_config()
    with cfg.change_flags({"traceback.limit": 1}):
        with cfg.change_flags(traceback__limit=2):
            assert cfg.traceback__limit == 2
        assert cfg.traceback__limit == 1
    assert cfg.traceback__limit == 8


def test_change_flags_unknown_name_lists_valid_names():
    cfg = core_config()
    with pytest.raises(ValueError) as info:
        cfg.change_flags(floatx="float32")
    message = str(info.value)
    assert "Unknown opgraph flag 'floatx' in change_flags. Did you mean 'floatX'?" in message
    assert "Valid flags: DebugMode__check_c, " in message and "warn_float64" in message


def test_change_flags_bad_value_raises_before_changing_anything():
    cfg = core_config()
    with pytest.raises(ValueError, match="'float31'"):
        cfg.change_flags(profile=True, floatX="float31")
    assert cfg.profile is False


def test_module_level_change_flags_acts_on_singleton():
    config = configdefaults.config
    before = config.floatX
    other = "float16" if before != "float16" else "float32"
    with configdefaults.change_flags(floatX=other):
        assert config.floatX == other
    assert config.floatX == before

    @configparser.change_flags(floatX=other)
    def f():
        return config.floatX

    assert f() == other
    assert config.floatX == before


# ----------------------------------------------------------------- errors


def test_unknown_flag_in_flags_string_reported_with_suggestion():
    cfg = core_config("floatx=float32")
    with pytest.raises(ValueError) as info:
        cfg.check_unknown_flags()
    message = str(info.value)
    assert message.startswith(
        "Unknown opgraph flag 'floatx' in OPGRAPH_FLAGS. Did you mean 'floatX'? Valid flags: "
    )
    valid = message.split("Valid flags: ")[1].splitlines()[0].split(", ")
    assert valid == sorted(valid) and "floatX" in valid and "compiledir" in valid


def test_unknown_flag_in_rc_names_the_file(tmp_path):
    rc = write_rc(tmp_path / "rc", "[nvcc]\nfastmath = True\n")
    cfg = core_config("profle=1", [rc])
    with pytest.raises(ValueError) as info:
        cfg.check_unknown_flags()
    message = str(info.value)
    assert "Unknown opgraph flag 'profle' in OPGRAPH_FLAGS. Did you mean 'profile'?" in message
    assert f"Unknown opgraph flag 'nvcc__fastmath' in rc file {rc}." in message
    assert message.count("Valid flags:") == 1


def test_check_unknown_flags_passes_when_all_declared():
    cfg = core_config("floatX=float32,traceback.limit=2")
    cfg.check_unknown_flags()


def test_unknown_attribute_suggests():
    cfg = core_config()
    with pytest.raises(AttributeError, match="Did you mean 'floatX'"):
        cfg.floatx  # noqa: B018
    with pytest.raises(AttributeError, match="Unknown opgraph flag 'floatx'"):
        cfg.floatx = "float32"
    assert not hasattr(cfg, "no_such_flag")


def test_enum_error_lists_options():
    cfg = core_config()
    with pytest.raises(ValueError) as info:
        cfg.floatX = "float31"
    assert str(info.value) == (
        "Invalid value for opgraph flag 'floatX': got 'float31'. "
        "Valid values: 'float64', 'float32', 'float16'."
    )


def test_bad_value_from_flags_string_names_source():
    with pytest.raises(ValueError) as info:
        core_config("optimizer=fastest")
    message = str(info.value)
    assert "'optimizer': got 'fastest'" in message and "'fast_run', 'merge'" in message
    assert "The value comes from OPGRAPH_FLAGS." in message
    assert "HINT: fix or remove optimizer=fastest there." in message


def test_bad_value_from_rc_names_the_file(tmp_path):
    rc = write_rc(tmp_path / "rc", "[global]\nprofile = maybe\n")
    with pytest.raises(ValueError, match=re.escape(f"comes from rc file {rc}")):
        core_config(rc_paths=[rc])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (True, True),
        (False, False),
        (1, True),
        (0, False),
        ("1", True),
        ("0", False),
        ("TRUE", True),
        ("False", False),
        ("yes", True),
        (" No ", False),
    ],
)
def test_bool_param_accepts(raw, expected):
    assert BoolParam(False).filter(raw) is expected


@pytest.mark.parametrize("raw", ["maybe", "2", 2, None, ""])
def test_bool_param_rejects(raw):
    param = BoolParam(False)
    param.name = "profile"
    with pytest.raises(ValueError, match=r"opgraph flag 'profile'.*Valid values: True, False"):
        param.filter(raw)


@pytest.mark.parametrize("raw", ["cpu", "cuda", "cuda0", "cuda12", "gpu", "gpu3"])
def test_device_param_accepts(raw):
    assert DeviceParam("cpu").filter(raw) == raw


@pytest.mark.parametrize("raw", ["tpu", "cuda-1", "CUDA0", "gpu0x", ""])
def test_device_param_rejects_and_lists_forms(raw):
    with pytest.raises(ValueError) as info:
        DeviceParam("cpu").filter(raw)
    assert "'cpu', 'cuda', 'cudaN' (e.g. 'cuda0'), 'gpu', 'gpuN'" in str(info.value)


def test_int_float_str_path_params(monkeypatch, tmp_path):
    assert IntParam(0).filter(" 7 ") == 7
    assert FloatParam(0.0).filter("2.5") == 2.5
    assert FloatParam(0.0).filter(3) == 3.0
    for bad_param, bad in ((IntParam(0), "1.5"), (IntParam(0), True), (FloatParam(1.0), "x")):
        with pytest.raises(ValueError):
            bad_param.filter(bad)
    upper = StrParam("A", str.isupper, valid_desc="Expected upper case.")
    assert upper.filter("B") == "B"
    with pytest.raises(ValueError, match="Expected upper case"):
        upper.filter("b")
    with pytest.raises(ValueError):
        StrParam("").filter(3)
    monkeypatch.setenv("OPG_TEST_DIR", str(tmp_path))
    assert PathParam("x").filter("$OPG_TEST_DIR/cache") == str(tmp_path / "cache")
    assert PathParam("x").filter("~/c") == os.path.expanduser("~/c")
    assert PathParam("x").filter(tmp_path) == str(tmp_path)


def test_mode_and_linker_accept_plugin_names_but_not_garbage():
    cfg = core_config("mode=MY_PLUGIN_MODE,linker=c|py")
    assert (cfg.mode, cfg.linker) == ("MY_PLUGIN_MODE", "c|py")
    for name, bad in (("mode", ""), ("mode", "FAST RUN"), ("linker", "c py")):
        with pytest.raises(ValueError, match=f"opgraph flag '{name}'"):
            setattr(cfg, name, bad)


def test_optimizer_none_accepted_as_python_none():
    cfg = core_config()
    cfg.optimizer = None
    assert cfg.optimizer == "None"


# ----------------------------------------------------------------- declaring flags


def test_immutable_flag_cannot_change_after_read():
    cfg = core_config()
    cfg.device = "cuda0"  # not read yet: allowed
    assert cfg.device == "cuda0"
    cfg.device = "cuda0"  # same value: allowed
    with pytest.raises(ValueError, match="'device' cannot be changed after it was read"):
        cfg.device = "cpu"
    with pytest.raises(ValueError, match="cannot be changed"), cfg.change_flags(device="cpu"):
        pass
    assert cfg.device == "cuda0"


def test_immutable_flag_change_flags_before_read_restores():
    cfg = core_config()
    with cfg.change_flags(device="gpu"):
        pass
    assert cfg.source("device") == "default"


def test_plugin_flag_declared_later_picks_up_raw_values(tmp_path):
    rc = write_rc(tmp_path / "rc", "[mygcc]\ncxxflags = -O2\ncxx = clang++\n")
    cfg = core_config("mygcc.cxxflags=-O3 -march=native,myplugin__workers=4", [rc])
    with pytest.raises(ValueError):
        cfg.check_unknown_flags()
    cfg.add("mygcc__cxxflags", "Extra C++ flags.", StrParam(""))
    cfg.add("mygcc.cxx", "C++ compiler.", StrParam("g++"))
    cfg.add("myplugin__workers", default=1, doc="Worker count.")
    cfg.check_unknown_flags()
    assert cfg.mygcc__cxxflags == "-O3 -march=native"
    assert cfg.mygcc.cxx == "clang++"
    assert cfg.myplugin__workers == 4
    assert isinstance(cfg.get_param("myplugin__workers"), IntParam)
    assert cfg.get_param("myplugin.workers").doc == "Worker count."


def test_plugin_flag_with_bad_raw_value_fails_at_add():
    cfg = Config("myplugin__fast=perhaps")
    with pytest.raises(ValueError, match=r"'myplugin__fast'.*\nThe value comes from OPGRAPH_FLAGS"):
        cfg.add("myplugin__fast", "Go fast.", BoolParam(False))


def test_add_twice_and_bad_declarations_raise():
    cfg = Config()
    cfg.add("x", "An x.", IntParam(1))
    with pytest.raises(ValueError, match="already declared"):
        cfg.add("x", "Again.", IntParam(2))
    with pytest.raises(ValueError, match="clashes with a Config method"):
        cfg.add("describe", "", IntParam(1))
    with pytest.raises(ValueError, match="identifier"):
        cfg.add("a-b", "", IntParam(1))
    with pytest.raises(TypeError, match="either param or default"):
        cfg.add("y", "", IntParam(1), default=1)
    with pytest.raises(TypeError, match="needs a ConfigParam"):
        cfg.add("z", "", default=[1])
    with pytest.raises(ValueError, match="'w': got 'nope'"):
        cfg.add("w", "", IntParam("nope"))
    assert "x" in cfg and "y" not in cfg


def test_callable_default_evaluated_lazily():
    calls = []

    def default() -> int:
        calls.append(1)
        return 5

    cfg = Config()
    cfg.add("lazy", "Lazy.", IntParam(default))
    assert calls == []
    assert cfg.lazy == 5 and cfg.lazy == 5
    assert calls == [1]


def test_compiledir_honours_opgraph_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OPGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    assert core_config().compiledir == str(tmp_path / "cache")
    monkeypatch.delenv("OPGRAPH_CACHE_DIR")
    assert core_config().compiledir.rstrip(os.sep).endswith("opgraph")
    assert core_config("compiledir=~/oc").compiledir == os.path.expanduser("~/oc")


def test_core_flags_declared_with_theano_defaults():
    expected = {
        "floatX": "float64",
        "mode": "Mode",
        "linker": "auto",
        "optimizer": "fast_run",
        "optimizer_including": "",
        "optimizer_excluding": "",
        "optimizer_requiring": "",
        "on_opt_error": "warn",
        "device": "cpu",
        "exception_verbosity": "low",
        "allow_gc": True,
        "profile": False,
        "profile_optimizer": False,
        "on_unused_input": "raise",
        "warn_float64": "ignore",
        "cast_policy": "custom",
        "compute_test_value": "off",
        "traceback__limit": 8,
        "traceback__compile_limit": 0,
        "print_global_stats": False,
        "unittests__rseed": "666",
        "DebugMode__check_c": True,
        "DebugMode__check_py": True,
        "DebugMode__check_finite": True,
        "NanGuardMode__nan_is_error": True,
        "NanGuardMode__inf_is_error": True,
        "NanGuardMode__big_is_error": False,
        "optdb__max_use_ratio": 8.0,
        "deterministic": "default",
    }
    values = {name: value for name, _, value in core_config()}
    assert {k: values[k] for k in expected} == expected
    assert "compiledir" in values


# ----------------------------------------------------------------- listing and hashing


def test_describe_lists_value_default_and_doc():
    cfg = core_config("floatX=float32")
    text = str(cfg)
    assert "floatX = 'float32'  (OPGRAPH_FLAGS)" in text
    assert "default: 'float64'  [EnumStr] Valid values: 'float64', 'float32', 'float16'." in text
    assert "Default float dtype" in text
    assert text == cfg.describe()
    assert "device" in dir(cfg) and "traceback" in dir(cfg)


def test_listing_does_not_count_as_reading_immutable_flags():
    cfg = core_config()
    list(cfg.flags())
    cfg.describe()
    cfg.device = "cuda"
    assert cfg.device == "cuda"


# ----------------------------------------------------------------- real process


def test_opgraph_flags_in_subprocess():
    env = dict(os.environ, OPGRAPH_FLAGS="floatX=float32", OPGRAPHRC="")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CORE_SRC), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, "-c", "from opgraph.configdefaults import config; print(config.floatX)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "float32"


def test_current_is_the_hot_path_reader_and_follows_change_flags() -> None:
    from opgraph.configdefaults import config

    assert config.current("traceback__limit") == config.traceback__limit
    with config.change_flags(traceback__limit=3):
        assert config.current("traceback__limit") == 3
    assert config.current("traceback__limit") == config.traceback__limit
    with pytest.raises(ValueError, match="no_such_flag"):
        config.current("no_such_flag")
