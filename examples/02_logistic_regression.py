"""Theano's logistic-regression tutorial, unchanged but for ``import opgraph as theano``.

400 random examples with 784 features, shared weights, gradient updates, 10,000 steps.
Prints the final cost and the training accuracy. ``python examples/02_logistic_regression.py``
(``--steps N`` for a shorter run).
"""

import argparse

import numpy

import opgraph as theano
import opgraph.tensor as T

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--steps", type=int, default=10000, help="training steps (default 10000)")
args = parser.parse_args()

rng = numpy.random.RandomState(42)

N = 400  # training sample size
feats = 784  # number of input variables

# generate a dataset: D = (input_values, target_class)
D = (rng.randn(N, feats), rng.randint(size=N, low=0, high=2))
training_steps = args.steps

# Declare Theano symbolic variables
x = T.dmatrix("x")
y = T.dvector("y")

# initialize the weight vector w randomly
w = theano.shared(rng.randn(feats), name="w")

# initialize the bias term
b = theano.shared(0.0, name="b")

# Construct Theano expression graph
p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))  # Probability that target = 1
prediction = p_1 > 0.5  # The prediction thresholded
xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)  # Cross-entropy loss function
cost = xent.mean() + 0.01 * (w**2).sum()  # The cost to minimize
gw, gb = T.grad(cost, [w, b])  # Compute the gradient of the cost w.r.t. w and b

# Compile
train = theano.function(
    inputs=[x, y],
    outputs=[prediction, xent],
    updates=((w, w - 0.1 * gw), (b, b - 0.1 * gb)),
)
predict = theano.function(inputs=[x], outputs=prediction)
get_cost = theano.function(inputs=[x, y], outputs=cost)

# Train
for _ in range(training_steps):
    pred, err = train(D[0], D[1])

accuracy = (predict(D[0]) == D[1]).mean()
print(f"steps: {training_steps}")
print(f"final cost: {get_cost(D[0], D[1]):.6f}")
print(f"training accuracy: {accuracy:.4f}")
