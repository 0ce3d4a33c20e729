"""Batch normalization (``opgraph.tensor.nnet.bn``): values against Theano 1.0.5, gradients,
shapes, layouts and bad input.

The golden values were computed by the Theano 1.0.5 oracle (``THEANO_FLAGS=device=cpu``,
float64) on the inputs :func:`data` builds; the cost of every gradient is ``sum(out * w)``
with ``w = data(shape, 5)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor.nnet.bn import (
    AbstractBatchNormInference,
    AbstractBatchNormTrain,
    AbstractBatchNormTrainGrad,
    BNComposite,
    batch_normalization,
    batch_normalization_test,
    batch_normalization_train,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

FLOATS = ["float32", "float64"]

#: name -> (input shape, axes, parameter shape)
CASES = {
    "per-activation": ((3, 4), "per-activation", (4,)),
    "spatial": ((2, 2, 2, 2), "spatial", (2,)),
    "tuple": ((2, 3, 2), (0, 2), (3,)),
}


def data(shape: tuple[int, ...], k: int) -> np.ndarray:
    """Deterministic test values (the oracle's inputs)."""
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * 1.37 + k) * (1 + 0.5 * k) + 0.3 * k).reshape(shape)


def tensor(dtype: str, ndim: int, name: str | None = None) -> Any:
    return T.TensorType(dtype, (False,) * ndim)(name)


GOLDEN = {
    "per-activation": {
        "out": [
            4.5443964427,
            1.628800904,
            -0.6299185493,
            1.5491557088,
            1.8747264402,
            0.4405753253,
            -1.8142262445,
            0.3179111534,
            0.836661678,
            -1.6279353599,
            -1.7535682462,
            -1.1009921165,
        ],
        "mean": [-0.5729796582, 0.4275599851, 0.7435330977, -0.1309650473],
        "invstd": [2.374898697, 1.9930389431, 4.0029064721, 1.7238494024],
        "nrm": [1.0702220523, -1.2666433858, -0.2785939401, 2.4524038705],
        "nrv": [1.4399468038, 1.5446750986, 2.7302938651, 4.1924578656],
        "gx": [
            0.9582382071,
            1.3497794958,
            -0.1656282815,
            0.6922902115,
            -3.4308726754,
            -2.1220601439,
            -2.9542421936,
            -1.2919025398,
            2.4726344683,
            0.7722806481,
            3.1198704751,
            0.5996123283,
        ],
        "gg": [-2.6231170474, 4.4429872283, -3.6270828854, 2.6408438589],
        "gb": [-2.7740879979, -0.9902174482, 9.5840433214, 12.0182394922],
        "t_out": [
            0.8568856116,
            2.6796084972,
            -1.6446700639,
            2.0542352981,
            -0.0401144792,
            2.2188798761,
            -1.8148244316,
            1.7213024081,
            -0.388900728,
            1.4168250367,
            -1.806109447,
            1.3376259368,
        ],
        "t_gx": [
            -2.3139361813,
            1.8758112138,
            -1.5600413761,
            -1.304252775,
            -1.9260008631,
            -0.8303019873,
            -1.1372097802,
            -2.3460019863,
            0.7818281723,
            -2.0754465725,
            -0.3066942319,
            -2.4167481084,
        ],
        "t_gg": [3.1601975082, 0.2822383956, 5.7387493765, -15.3662926669],
        "t_gb": [-2.7740879979, -0.9902174482, 9.5840433214, 12.0182394922],
        "t_gm": [3.4581088721, 1.029937346, 3.0039453881, 6.0670028697],
        "t_gv": [-1.5717470502, -0.1134301249, 0.5172309699, -1.8079405742],
    },
    "spatial": {
        "out": [
            2.1918421817,
            4.3735016066,
            3.0621049089,
            0.3573300731,
            -1.3170610726,
            1.0844827381,
            1.8428967378,
            -0.2561161515,
            -0.0331411394,
            1.6704752681,
            4.2088525319,
            3.5177933984,
            -1.2192315311,
            -1.5896224005,
            0.6783681488,
            1.9534591826,
        ],
        "mean": [0.1018475976, 0.046521206],
        "invstd": [1.425158574, 1.4200485955],
        "nrm": [1.1377047779, -1.3047472637],
        "nrv": [1.4696238385, 1.5635904788],
        "gx": [
            -7.2187111754,
            -1.2583554808,
            7.1227663078,
            4.505635418,
            -3.8155436702,
            -4.8037147568,
            2.8937752186,
            6.9524707611,
            0.5413693737,
            -7.0057787806,
            -2.9299581885,
            6.2430325258,
            5.4089646012,
            -2.6072421529,
            -5.4545613567,
            1.4258513557,
        ],
        "gg": [5.628648567, 5.6661501808],
        "gb": [11.9058022865, 9.7746115351],
        "t_out": [
            0.8568856116,
            2.0784145478,
            1.3441528226,
            -0.170272706,
            0.9119587246,
            2.2188798761,
            2.6316090936,
            1.4893253967,
            -0.388900728,
            0.5649680171,
            1.9862261857,
            1.5992965309,
            0.9651976022,
            0.7636307354,
            1.9978721458,
            2.6917772226,
        ],
        "t_gx": [
            -2.3139361813,
            2.2481605617,
            6.2045641762,
            3.2206746274,
            -1.6070088936,
            -0.8303019873,
            3.7737884664,
            4.833650673,
            0.7818281723,
            -2.4874236265,
            1.2197779324,
            5.9678303644,
            3.4665187754,
            -1.0986354428,
            -1.4067772683,
            3.0354593477,
        ],
        "t_gg": [-7.782900747, 14.424765983],
        "t_gb": [11.9058022865, 9.7746115351],
        "t_gm": [-14.8414760265, -10.1666936703],
        "t_gv": [3.8708818861, -5.7972374856],
    },
    "tuple": {
        "out": [
            1.1126999398,
            4.0389737256,
            2.1387664026,
            -0.8574204348,
            -0.4797178169,
            -1.580833334,
            3.9011622968,
            0.6215434523,
            -1.2899609523,
            0.5972028103,
            -1.9042024185,
            -1.6321971507,
        ],
        "mean": [0.4372991207, -0.4166606431, 0.3297228054],
        "invstd": [1.9115743402, 1.8324040654, 1.6079570944],
        "nrm": [1.1712499302, -1.3510654486, -0.3199749694],
        "nrv": [1.4498419327, 1.5466240232, 2.7725032733],
        "gx": [
            -10.7336140784,
            -1.9300131258,
            4.7165439396,
            4.4404176581,
            0.1469618822,
            1.8358181334,
            3.6193718708,
            9.0442553334,
            0.4277043584,
            -9.5846659561,
            0.9669351907,
            -2.9497152063,
        ],
        "gg": [1.5197423341, 4.0998641757, 5.2938508689],
        "gb": [8.2227251362, 6.192682404, 3.4225698273],
        "t_out": [
            0.8568856116,
            2.0784145478,
            2.0669581369,
            0.8033578241,
            -1.2966175327,
            -1.6904508195,
            2.0208872416,
            0.6518597303,
            0.6209398499,
            1.4168250367,
            -1.806109447,
            -1.7088219899,
        ],
        "t_gx": [
            -2.3139361813,
            2.2481605617,
            5.1769394308,
            2.6872536086,
            0.4842630282,
            0.2502068012,
            4.5228871305,
            5.7931324495,
            0.6523386621,
            -2.0754465725,
            -0.3066942319,
            -1.5005183329,
        ],
        "t_gg": [-4.7164248469, 6.6976541518, 3.3143768278],
        "t_gb": [8.2227251362, 6.192682404, 3.4225698273],
        "t_gm": [-10.2502439604, -6.4410851289, 1.0727427353],
        "t_gv": [2.3457479545, -2.6917519328, 0.298723333],
    },
    "elem low_mem": {
        "out": [
            1.1723372271,
            2.1043274352,
            -1.5403939663,
            1.0938959967,
            0.4565233137,
            1.7482592191,
            -1.6382553742,
            0.9387009566,
            0.1781888383,
            1.1284014051,
            -1.6332430981,
            0.7598520439,
        ],
        "gx": [
            -1.8465412995,
            1.4496966806,
            -0.8972314229,
            -0.6079710591,
            -1.5369655246,
            -0.6416882606,
            -0.6540469791,
            -1.0935773644,
            0.6239057157,
            -1.6039823117,
            -0.1763900024,
            -1.1265553236,
        ],
        "gg": [2.5218652358, 0.2181243305, 3.3005446829, -7.1629222538],
        "gb": [-2.7740879979, -0.9902174482, 9.5840433214, 12.0182394922],
        "gm": [2.7596011083, 0.7959738916, 1.7276684044, 2.828103747],
        "gs": [-2.5086955082, -0.1753365107, 0.5949729748, -1.6855619559],
    },
    "elem high_mem": {
        "out": [
            1.1723372271,
            2.1043274352,
            -1.5403939663,
            1.0938959967,
            0.4565233137,
            1.7482592191,
            -1.6382553742,
            0.9387009566,
            0.1781888383,
            1.1284014051,
            -1.6332430981,
            0.7598520439,
        ],
        "gx": [
            -1.8465412995,
            1.4496966806,
            -0.8972314229,
            -0.6079710591,
            -1.5369655246,
            -0.6416882606,
            -0.6540469791,
            -1.0935773644,
            0.6239057157,
            -1.6039823117,
            -0.1763900024,
            -1.1265553236,
        ],
        "gg": [2.5218652358, 0.2181243305, 3.3005446829, -7.1629222538],
        "gb": [-2.7740879979, -0.9902174482, 9.5840433214, 12.0182394922],
        "gm": [2.7596011083, 0.7959738916, 1.7276684044, 2.828103747],
        "gs": [-2.5086955082, -0.1753365107, 0.5949729748, -1.6855619559],
    },
}


def _gold(case: str, names: list[str], shape: tuple[int, ...], pshape: tuple[int, ...]) -> list:
    g = GOLDEN[case]
    return [
        np.reshape(g[n], shape if n in ("out", "gx", "t_out", "t_gx") else pshape) for n in names
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_train_and_test_match_theano(case: str) -> None:
    shape, axes, pshape = CASES[case]
    x, g, b, rm, rv = tensor("float64", len(shape)), *(tensor("float64", 1) for _ in range(4))
    out, mean, invstd, nrm, nrv = batch_normalization_train(x, g, b, axes, 1e-4, 0.1, rm, rv)
    w = data(shape, 5)
    grads = opgraph.grad((out * w).sum(), [x, g, b])
    t_out = batch_normalization_test(x, g, b, rm, rv, axes, 1e-4)
    t_grads = opgraph.grad((t_out * w).sum(), [x, g, b, rm, rv])
    vals = [data(shape, 0), data(pshape, 1), data(pshape, 2), data(pshape, 3)]
    vals.append(np.abs(data(pshape, 4)) + 0.5)
    outs = [out, mean, invstd, nrm, nrv, *grads, t_out, *t_grads]
    names = ["out", "mean", "invstd", "nrm", "nrv", "gx", "gg", "gb"]
    names += ["t_out", "t_gx", "t_gg", "t_gb", "t_gm", "t_gv"]
    expected = _gold(case, names, shape, pshape)
    check_modes([x, g, b, rm, rv], outs, vals, expected, modes=("FAST_RUN", "DEBUG_MODE"))
    # float32 end to end, against the float64 golden values
    x32, g32, b32, rm32, rv32 = (
        tensor("float32", len(shape)),
        *(tensor("float32", 1) for _ in range(4)),
    )
    o32 = list(batch_normalization_train(x32, g32, b32, axes, 1e-4, 0.1, rm32, rv32))
    o32 += opgraph.grad((o32[0] * w.astype("float32")).sum(), [x32, g32, b32])
    got = opgraph.function([x32, g32, b32, rm32, rv32], o32)(*[v.astype("float32") for v in vals])
    for k, (v, e) in enumerate(zip(got, expected[:8], strict=True)):
        assert v.dtype == np.float32
        np.testing.assert_allclose(v, e, rtol=2e-4, atol=2e-4, err_msg=names[k])


@pytest.mark.parametrize("mode", ["low_mem", "high_mem"])
def test_elementwise_batch_normalization_matches_theano(mode: str) -> None:
    x, g, b, m, s = T.dmatrix(), T.dvector(), T.dvector(), T.dvector(), T.dvector()
    out = batch_normalization(x, g, b, m, s, mode)
    if mode == "low_mem":
        assert isinstance(out.owner.op.scalar_op, BNComposite)
    grads = opgraph.grad((out * data((3, 4), 5)).sum(), [x, g, b, m, s])
    vals = [data((3, 4), 0), data((4,), 1), data((4,), 2), data((4,), 3)]
    vals.append(np.abs(data((4,), 4)) + 0.5)
    gold = GOLDEN[f"elem {mode}"]
    expected = [np.reshape(gold[n], (3, 4) if n in ("out", "gx") else (4,)) for n in gold]
    check_modes([x, g, b, m, s], [out, *grads], vals, expected, modes=("FAST_RUN", "DEBUG_MODE"))


def test_batch_normalization_upcasts_and_checks() -> None:
    x = T.ftensor4()
    g = T.dvector().dimshuffle("x", 0, "x", "x")
    assert batch_normalization(x, g, g, g, g).type.dtype == "float64"
    assert batch_normalization(x, g, g, g, g, "high_mem").type.dtype == "float64"
    with pytest.raises(ValueError, match="mode must be"):
        batch_normalization(x, g, g, g, g, "fast")
    with pytest.raises(ValueError, match="gamma may not have more dimensions"):
        batch_normalization(T.dmatrix(), x, g, g, g)
    assert BNComposite("float32") == BNComposite("float32") != BNComposite("float64")


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad of a fixed random weighting of all of ``fun``'s outputs."""
    ins = [tensor("float64", np.ndim(p)) for p in pt]
    outs = fun(*ins)
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    vals = opgraph.function(ins, outs, mode=Mode(linker="py", optimizer=None))(*pt)
    weights = [rng.random(np.shape(v)) + 0.5 for v in vals]

    def cost(*a: Any) -> Any:
        res = fun(*a)
        res = list(res) if isinstance(res, list | tuple) else [res]
        return sum((r * w).sum() for r, w in zip(res, weights, strict=True))

    _verify_grad(cost, pt, rng=rng, n_tests=1)


@pytest.mark.parametrize(
    ("axes", "pshape"), [("spatial", (2,)), ((0, 1), (2,)), ("per-activation", (2, 2))]
)
def test_verify_grad_functions(axes: Any, pshape: tuple, rng: np.random.Generator) -> None:
    xv = rng.standard_normal((3, 2, 2))
    pv = [rng.standard_normal(pshape) for _ in range(3)] + [rng.random(pshape) + 0.5]
    verify_grad(
        lambda x, g, b, rm, rv: batch_normalization_train(x, g, b, axes, 1e-4, 0.3, rm, rv),
        [xv, *pv],
        rng,
    )
    verify_grad(lambda x, g, b, m, v: batch_normalization_test(x, g, b, m, v, axes), [xv, *pv], rng)


@pytest.mark.parametrize("mode", ["low_mem", "high_mem"])
def test_verify_grad_elementwise(mode: str, rng: np.random.Generator) -> None:
    vals = [rng.standard_normal((3, 2)) for _ in range(4)] + [rng.random((3, 2)) + 0.5]
    verify_grad(lambda x, g, b, m, s: batch_normalization(x, g, b, m, s, mode), vals, rng)


def test_verify_grad_ops(rng: np.random.Generator) -> None:
    shape, axes = (3, 2, 2), (0, 2)
    pshape = (1, 2, 1)
    xv, dyv = rng.standard_normal(shape), rng.standard_normal(shape)
    sv, mv, iv = rng.standard_normal(pshape), rng.standard_normal(pshape), rng.random(pshape) + 0.5

    def bc(v: Any) -> Any:
        return T.addbroadcast(v, *axes)

    verify_grad(
        lambda x, s, b: AbstractBatchNormTrain(axes)(x, bc(s), bc(b), 1e-4)[:3], [xv, sv, mv], rng
    )
    verify_grad(
        lambda x, s, b, m, v: AbstractBatchNormInference(axes)(x, bc(s), bc(b), bc(m), bc(v)),
        [xv, sv, mv, iv, iv + 1],
        rng,
    )
    # the gradient op at arbitrary x_mean and x_invstd (its own gradient, Theano's formulas)
    verify_grad(
        lambda x, dy, s, m, i: AbstractBatchNormTrainGrad(axes)(x, dy, bc(s), bc(m), bc(i)),
        [xv, dyv, sv, mv, iv],
        rng,
    )


def test_layouts_shapes_and_infer_shape(rng: np.random.Generator) -> None:
    x = T.ftensor4()
    g4 = T.TensorType("float32", (False,) * 4)()
    out, mean, invstd = batch_normalization_train(x, g4, g4, "spatial")
    assert mean.type.broadcastable == (True, False, True, True) == invstd.type.broadcastable
    out, mean, invstd = batch_normalization_train(x, T.fvector(), T.fvector(), "spatial")
    assert (out.type.ndim, mean.type.ndim) == (4, 1)
    res = batch_normalization_train(x, T.ftensor3(), T.ftensor3(), "per-activation")
    assert [r.type.ndim for r in res] == [4, 3, 3]
    rm = T.TensorType("float32", (False,) * 4)()
    res = batch_normalization_train(x, g4, g4, "spatial", running_mean=rm, running_var=rm)
    assert res[3].type.broadcastable == (True, False, True, True)  # as Theano
    assert batch_normalization_train(x, T.dvector(), T.dvector(), "spatial")[0].type.dtype == (
        "float64"
    )
    xv = rng.standard_normal((2, 3, 4, 2)).astype("float32")
    gv = rng.standard_normal((1, 3, 1, 1)).astype("float32")
    res = batch_normalization_train(x, g4, g4, "spatial", running_mean=g4, running_var=g4)
    vals = opgraph.function([x, g4], list(res))(xv, gv)
    assert [v.shape for v in vals] == [xv.shape] + [gv.shape] * 4
    axes = (0, 2, 3)
    ref_mean = xv.mean(axes, keepdims=True)
    assert_allclose(vals[1], ref_mean)
    assert_allclose(
        vals[0], (xv - ref_mean) * gv / np.sqrt(xv.var(axes, keepdims=True) + 1e-4) + gv
    )
    gx = opgraph.grad(res[0].sum() + res[2].sum(), x)
    check_infer_shape([x, g4], [*res, gx], [xv, gv])
    t = batch_normalization_test(x, g4, g4, g4, g4, "spatial")
    check_infer_shape([x, g4], [t, opgraph.grad(t.sum(), [x, g4])[1]], [xv, np.abs(gv) + 1])


def test_running_var_of_one_element_is_nan() -> None:
    x, g = T.dmatrix(), T.dvector()
    res = batch_normalization_train(x, g, g, running_mean=g, running_var=g)
    for mode in ("FAST_RUN", Mode(linker="py")):
        nrm, nrv = opgraph.function([x, g], list(res[3:]), mode=mode)(np.ones((1, 2)), np.ones(2))
        assert_allclose(nrm, [1.0, 1.0])
        assert np.isnan(nrv).all()


def test_bad_input() -> None:
    x, v = T.dtensor4(), T.dvector()
    with pytest.raises(ValueError, match=r"gamma must have 1 dimension\(s\)"):
        batch_normalization_train(x, T.dmatrix(), v, "spatial")
    with pytest.raises(ValueError, match="beta must have"):
        batch_normalization_train(x, v, T.dmatrix(), "spatial")
    with pytest.raises(ValueError, match=r"axes should be less than ndim \(<4\)"):
        batch_normalization_train(x, v, v, (0, 4))
    with pytest.raises(ValueError, match="not negative"):
        batch_normalization_test(x, v, v, v, v, (-1,))
    with pytest.raises(ValueError, match="axes must be 'per-activation'"):
        batch_normalization_train(x, v, v, "channels")
    with pytest.raises(ValueError, match="at least one normalization axis"):
        batch_normalization_train(x, v, v, ())
    with pytest.raises(ValueError, match="epsilon must be at least 1e-5"):
        batch_normalization_train(x, v, v, "spatial", epsilon=1e-6)
    with pytest.raises(ValueError, match="both be given"):
        batch_normalization_train(x, v, v, "spatial", running_mean=v)
    with pytest.raises(ValueError, match="var must have"):
        batch_normalization_test(x, v, v, v, T.dmatrix(), "spatial")
    xs = T.TensorType("float64", shape=(None, 3, None, None))()
    gs = T.TensorType("float64", shape=(4,))()
    with pytest.raises(ValueError, match="gamma has length 4 where inputs have 3"):
        batch_normalization_train(xs, gs, gs, "spatial")
    g4 = T.TensorType("float64", shape=(2, 3, 1, 1))()
    with pytest.raises(ValueError, match="length 1 on the normalized axes"):
        batch_normalization_train(xs, g4, g4, "spatial")
    with pytest.raises(TypeError, match="scale must have 4 dimension"):
        AbstractBatchNormTrain((0,))(x, v, v)
    with pytest.raises(ValueError, match="axes should be less than ndim"):
        AbstractBatchNormInference((5,))(x, x, x, x, x)
    with pytest.raises(TypeError, match="needs float tensors"):
        AbstractBatchNormTrain((0,))(T.itensor4(), T.itensor4(), T.itensor4())
    with pytest.raises(TypeError, match="epsilon must be a scalar"):
        AbstractBatchNormTrainGrad((0,))(x, x, x, x, x, v)
    with pytest.raises(TypeError, match="axes must be a tuple of ints"):
        AbstractBatchNormTrain("spatial")
    # run time: a parameter of the wrong length
    g = T.dvector()
    f = opgraph.function([x, g], batch_normalization_train(x, g, g, "spatial")[0])
    with pytest.raises(ValueError, match=r"scale has shape \(1, 3, 1, 1\) but x has shape"):
        f(np.ones((2, 2, 3, 3)), np.ones(3))
