"""Record ``MRG_RandomStreams`` draws from Theano 1.0.5 into ``theano_mrg.json``.

Theano is the oracle, never a dependency: run this with a Python 3.8 virtual environment
holding ``numpy<1.20``, ``scipy<1.6`` and ``theano==1.0.5``, and a C compiler (Theano's
FAST_RUN then runs the C code of ``mrg_uniform``, as it did for its users)::

    THEANO_FLAGS=device=cpu,base_compiledir=/tmp/theano_cache \\
        /tmp/theano_venv/bin/python record_theano.py theano_mrg.json

Exactly reproducible draws (uniforms, binomial, multinomial, choice) are stored as a digest
of their bytes; normal draws, whose last bits depend on the math library's log, sin and
cos, as their values at a few positions (after the first call only, except for the first seed).
"""

import hashlib
import json
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
SEEDS = (12345, 234, 1)
PV = [[0.1, 0.2, 0.3, 0.4], [0.5, 0.25, 0.125, 0.125], [0.97, 0.01, 0.01, 0.01]]
PC = [[0.1, 0.2, 0.3, 0.2, 0.2], [0.5, 0.2, 0.1, 0.1, 0.1], [0.05, 0.05, 0.3, 0.3, 0.3]]


def cases(R):
    """(name, variable) in the order the test builds them (each takes the next streams)."""
    pv, pc = np.array(PV, dtype="float32"), np.array(PC, dtype="float64")
    out = []
    for dt in ("float32", "float64"):
        out += [
            (f"uniform_{dt}_5", R.uniform((5,), dtype=dt)),
            (f"uniform_{dt}_3x4", R.uniform((3, 4), dtype=dt)),
            (f"uniform_{dt}_1001", R.uniform((1001,), dtype=dt)),
            (f"uniform_{dt}_1001_ns7", R.uniform((1001,), dtype=dt, nstreams=7)),
        ]
    out.append(("uniform_lowhigh_3x4", R.uniform((3, 4), low=-2.0, high=3.0, dtype="float64")))
    out.append(("uniform_default_5", R.uniform((5,))))
    for dt in ("float32", "float64"):
        out += [
            (f"normal_{dt}_5", R.normal((5,), dtype=dt)),
            (f"normal_{dt}_3x4", R.normal((3, 4), dtype=dt)),
            (f"normal_{dt}_1001", R.normal((1001,), dtype=dt)),
            (f"normal_{dt}_1001_ns7", R.normal((1001,), dtype=dt, nstreams=7)),
            (f"normal_{dt}_1001_trunc", R.normal((1001,), dtype=dt, truncate=True)),
            (f"normal_{dt}_3x4_avgstd", R.normal((3, 4), avg=1.0, std=2.0, dtype=dt)),
        ]
    out.append(("truncated_normal_7", R.truncated_normal((7,), dtype="float64")))
    out.append(("binomial_3x4", R.binomial((3, 4), p=0.3)))
    out.append(("binomial_1001_int8", R.binomial((1001,), p=0.7, dtype="int8")))
    out.append(("multinomial_n1", R.multinomial(pvals=pv)))
    out.append(("multinomial_n3", R.multinomial(pvals=pv, n=3)))
    out.append(("choice_2", R.choice(size=2, replace=False, p=pc)))
    out.append(("multinomial_wo_replacement_1", R.multinomial_wo_replacement(pvals=pc, n=1)))
    return out


def digest(a):
    """12 hex digits of the sha256 of dtype, shape and little-endian bytes."""
    a = np.ascontiguousarray(a, dtype=np.asarray(a).dtype.newbyteorder("<"))
    head = (a.dtype.str + str(a.shape)).encode()
    return hashlib.sha256(head + a.tobytes()).hexdigest()[:12]


def positions(n):
    """The positions at which normal draws of n values are recorded."""
    return sorted({0, 1, n // 3, n // 2, n - 2, n - 1} & set(range(n)))


def record(name, a):
    a = np.asarray(a)
    if name.startswith(("normal", "truncated")):
        flat = a.ravel()
        digits = 9 if a.dtype == np.float32 else 17
        return [float(f"{flat[i]:.{digits}g}") for i in positions(flat.size)]
    return digest(a)


def main(path):
    import theano  # the oracle: only this function needs it (the test imports the rest)
    from theano.sandbox.rng_mrg import MRG_RandomStreams

    result = {"theano": theano.__version__, "numpy": np.__version__, "seeds": {}}
    for seed in SEEDS:
        fresh = MRG_RandomStreams(seed)
        rec = {
            "substreams_5": fresh.get_substream_rstates(5, "float32").tolist(),
            "rstate_after": fresh.rstate.tolist(),
            "substreams_3_noinc": fresh.get_substream_rstates(
                3, "float64", inc_rstate=False
            ).tolist(),
            "draws": {},
        }
        R = MRG_RandomStreams(seed)
        fns = [(name, v, theano.function([], v)) for name, v in cases(R)]
        draws = rec["draws"]
        brief = seed != SEEDS[0]
        for name, _, f in fns:
            first = np.asarray(f())
            draws[name] = {"dtype": first.dtype.str, "shape": list(first.shape)}
            draws[name]["calls"] = [record(name, first), record(name, f())]
        R.seed()
        for name, _, f in fns:
            draws[name]["calls"].append(record(name, f()))
            if brief and isinstance(draws[name]["calls"][0], list):
                del draws[name]["calls"][1:]
        R.seed(999)
        for name, _, f in fns[:3]:
            draws[name]["after_seed_999"] = record(name, f())
        result["seeds"][str(seed)] = rec
    with open(path, "w") as fh:
        json.dump(result, fh, separators=(",", ":"))
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
