"""Theano's flag sources and names: THEANO_FLAGS, THEANORC / ~/.theanorc, base_compiledir,
warn.*, and Theano 1.0 flags accepted without effect so that job files keep working."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from opgraph import configparser
from opgraph.configdefaults import add_core_flags
from opgraph.configparser import Config


def env_config(environ: dict[str, str]) -> tuple[Config, list[str]]:
    """Config.from_environment(environ) with core's flags, and the warnings it gave."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cfg = Config.from_environment(environ)
        add_core_flags(cfg)
    return cfg, [str(w.message) for w in record]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty HOME, so the user's real ~/.opgraphrc and ~/.theanorc play no part."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_theano_flags_read_when_opgraph_flags_absent(home):
    cfg, warned = env_config({"THEANO_FLAGS": "floatX=float32,optimizer=fast_compile"})
    assert (cfg.floatX, cfg.optimizer) == ("float32", "fast_compile")
    assert cfg.source("floatX") == "THEANO_FLAGS"
    assert warned == []


def test_opgraph_flags_win_and_warn_once(home):
    cfg, warned = env_config({"OPGRAPH_FLAGS": "floatX=float16", "THEANO_FLAGS": "floatX=float32"})
    assert cfg.floatX == "float16"
    assert len(warned) == 1
    assert "ignores THEANO_FLAGS (because OPGRAPH_FLAGS is set)" in warned[0]
    # the same text in both, or an empty THEANO_FLAGS, is no conflict
    assert (
        env_config({"OPGRAPH_FLAGS": "floatX=float16", "THEANO_FLAGS": "floatX=float16"})[1] == []
    )
    assert env_config({"OPGRAPH_FLAGS": "floatX=float16", "THEANO_FLAGS": ""})[1] == []


def test_theanorc_in_home_is_read(home):
    (home / ".theanorc").write_text("[global]\nfloatX = float32\n[gcc]\ncxxflags = -O3\n")
    cfg, warned = env_config({})
    assert cfg.floatX == "float32"
    assert cfg.gcc.cxxflags == "-O3"
    assert cfg.source("floatX") == f"rc file {home / '.theanorc'}"
    assert warned == []


def test_opgraphrc_wins_over_theanorc(home):
    (home / ".theanorc").write_text("[global]\nfloatX = float32\n")
    (home / ".opgraphrc").write_text("[global]\nfloatX = float16\n")
    cfg, warned = env_config({})
    assert cfg.floatX == "float16"
    assert len(warned) == 1 and "~/.theanorc (because ~/.opgraphrc exists)" in warned[0]


def test_theanorc_env_var(home, tmp_path):
    rc = tmp_path / "job.rc"
    rc.write_text("[global]\ndevice = cpu\nfloatX = float32\n")
    cfg, _ = env_config({"THEANORC": str(rc)})
    assert cfg.floatX == "float32"
    other = tmp_path / "mine.rc"
    other.write_text("[global]\nfloatX = float16\n")
    cfg, warned = env_config({"THEANORC": str(rc), "OPGRAPHRC": str(other)})
    assert cfg.floatX == "float16"
    assert any("THEANORC (because OPGRAPHRC is set)" in w for w in warned)


def test_unknown_theano_flags_warn_but_opgraph_ones_raise(home):
    # Theano 1.0.5 itself warns "Theano does not recognise this flag: lib.cnmem".
    cfg, _ = env_config({"THEANO_FLAGS": "lib.cnmem=0.8,nvcc.fastmath=True,floatX=float32"})
    with pytest.warns(UserWarning) as record:
        cfg.check_unknown_flags()
    assert [str(w.message).split(". ")[0] for w in record] == [
        "Unknown opgraph flag 'lib__cnmem' in THEANO_FLAGS",
        "Unknown opgraph flag 'nvcc__fastmath' in THEANO_FLAGS",
    ]
    assert cfg.floatX == "float32"
    cfg, _ = env_config({"OPGRAPH_FLAGS": "lib.cnmem=0.8"})
    with pytest.raises(ValueError, match="Unknown opgraph flag 'lib__cnmem' in OPGRAPH_FLAGS"):
        cfg.check_unknown_flags()


def test_unknown_flag_in_theanorc_warns(home):
    (home / ".theanorc").write_text("[lib]\ncnmem = 1\n")
    cfg, _ = env_config({})
    with pytest.warns(UserWarning, match=r"'lib__cnmem' in rc file .*\.theanorc"):
        cfg.check_unknown_flags()


def test_base_compiledir_is_the_cache_root(home, tmp_path):
    cfg, _ = env_config({"THEANO_FLAGS": f"base_compiledir={tmp_path / 'th'}"})
    assert cfg.base_compiledir == str(tmp_path / "th")
    assert cfg.compiledir == str(tmp_path / "th")
    cfg, _ = env_config({"THEANO_FLAGS": f"base_compiledir=/a,compiledir={tmp_path / 'c'}"})
    assert cfg.compiledir == str(tmp_path / "c")


def test_warn_flags_have_theanos_defaults(home):
    cfg, _ = env_config({})
    # Theano 1.0.5 with the default warn.ignore_bug_before='0.9':
    assert cfg.warn.ignore_bug_before == "0.9"
    assert cfg.warn.round is False
    assert cfg.warn.inc_subtensor1_opt is True
    assert cfg.warn.sum_sum_bug is False
    assert cfg.warn.vm_gc_bug is False
    cfg, _ = env_config({"THEANO_FLAGS": "warn.ignore_bug_before=None"})
    assert cfg.warn.round is True and cfg.warn.argmax_pushdown_bug is True
    cfg, _ = env_config({"THEANO_FLAGS": "warn.ignore_bug_before=all"})
    assert cfg.warn.inc_subtensor1_opt is False
    cfg, _ = env_config({"THEANO_FLAGS": "warn.ignore_bug_before=0.8,warn.round=False"})
    assert cfg.warn.round is False and cfg.warn.reduce_join is False


def test_theano_defaults_of_other_flags(home):
    cfg, _ = env_config({})
    expected = {  # Theano 1.0.5's defaults
        "deterministic": "default",
        "print_test_value": False,
        "compute_test_value": "off",
        "compute_test_value_opt": "off",
        "pickle_test_value": True,
        "exception_verbosity": "low",
        "on_shape_error": "warn",
        "int_division": "int",
        "cycle_detection": "regular",
        "check_input": True,
        "nocleanup": False,
        "gcc__cxxflags": "",
        "numpy__seterr_all": "ignore",
        "numpy__seterr_divide": "None",
        "vm__lazy": "None",
        "NanGuardMode__action": "raise",
        "DebugMode__patience": 10,
        "profiling__n_apply": 20,
        "cmodule__age_thresh_use": 60 * 60 * 24 * 24,
    }
    assert {name: getattr(cfg, name) for name in expected} == expected
    cfg, _ = env_config({"THEANO_FLAGS": "deterministic=more,optimizer=o4,mode=FAST_RUN"})
    assert (cfg.deterministic, cfg.optimizer, cfg.mode) == ("more", "o4", "FAST_RUN")
    assert "no effect" in cfg.get_param("cxx").doc or "does not use" in cfg.get_param("cxx").doc


def test_typical_theano_job_flags_are_accepted(home):
    flags = (
        "device=cpu,floatX=float32,mode=FAST_RUN,optimizer=fast_run,exception_verbosity=high,"
        "cxx=,gcc.cxxflags=-march=native,allow_gc=False,blas.ldflags=-lopenblas,"
        "compiledir_format=cd_%(processor)s,nocleanup=True,warn_float64=warn,"
        "print_test_value=True,compute_test_value=warn,on_unused_input=warn"
    )
    cfg, _ = env_config({"THEANO_FLAGS": flags})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg.check_unknown_flags()
    assert cfg.allow_gc is False and cfg.cxx == "" and cfg.exception_verbosity == "high"


def test_gpu_device_without_backend_warns(home, monkeypatch):
    monkeypatch.setattr(configparser, "CUDA_BACKEND_MODULE", "opgraph_no_such_backend")
    cfg, _ = env_config({"THEANO_FLAGS": "device=cuda0"})
    with pytest.warns(UserWarning, match=r"(?s)device=cuda0 .*pip install opgraph-backend-cuda"):
        cfg.check_unknown_flags()
    cfg, _ = env_config({"THEANO_FLAGS": "device=cpu"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg.check_unknown_flags()


def test_import_opgraph_reads_theano_flags(home):
    env = {k: v for k, v in os.environ.items() if k not in ("OPGRAPH_FLAGS", "OPGRAPHRC")}
    env.update(HOME=str(home), THEANO_FLAGS="floatX=float32,lib.cnmem=0.5,base_compiledir=/tmp/x")
    out = subprocess.run(
        [
            sys.executable,
            "-W",
            "always",
            "-c",
            "import opgraph; print(opgraph.config.floatX, opgraph.config.compiledir)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["float32", "/tmp/x"]
    assert "lib__cnmem" in out.stderr
