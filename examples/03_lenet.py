"""A LeNet in Theano 1.0 code, unchanged but for ``import opgraph as theano``.

The deep-learning tutorial's convolutional network (two conv + max-pool + tanh layers, a
tanh hidden layer, softmax regression, mean categorical cross-entropy, SGD) trained on a
small synthetic data set it can learn: 500 grey 28x28 images of 10 classes, each class a
blocky random template plus noise. Prints the loss over the training set every few steps
and the final training accuracy. ``python examples/03_lenet.py`` (``--steps N`` for a
shorter run).
"""

import argparse

import numpy

import opgraph as theano
import opgraph.tensor as T
from opgraph.tensor.nnet import conv2d
from opgraph.tensor.signal import pool

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--steps", type=int, default=100, help="SGD steps (default 100)")
parser.add_argument("--every", type=int, default=10, help="print the loss every N steps")
args = parser.parse_args()

rng = numpy.random.RandomState(23455)
floatX = theano.config.floatX

# generate a dataset: 10 classes, each a 7x7 random template blown up to 28x28, plus noise
n_classes, per_class, batch_size = 10, 50, 50
templates = numpy.kron(rng.randn(n_classes, 7, 7), numpy.ones((4, 4)))
labels = numpy.repeat(numpy.arange(n_classes), per_class)
images = templates[labels] + 2.0 * rng.randn(len(labels), 28, 28)
order = rng.permutation(len(labels))
data_x = images[order].reshape(-1, 1, 28, 28).astype(floatX)
data_y = labels[order].astype("int32")
n_batches = len(data_y) // batch_size


class LeNetConvPoolLayer:
    """Pool Layer of a convolutional network (the tutorial's)."""

    def __init__(self, rng, input, filter_shape, image_shape, poolsize=(2, 2)):
        assert image_shape[1] == filter_shape[1]
        fan_in = numpy.prod(filter_shape[1:])
        fan_out = filter_shape[0] * numpy.prod(filter_shape[2:]) // numpy.prod(poolsize)
        W_bound = numpy.sqrt(6.0 / (fan_in + fan_out))
        self.W = theano.shared(
            numpy.asarray(rng.uniform(low=-W_bound, high=W_bound, size=filter_shape), dtype=floatX),
            borrow=True,
        )
        self.b = theano.shared(numpy.zeros((filter_shape[0],), dtype=floatX), borrow=True)
        conv_out = conv2d(
            input=input, filters=self.W, filter_shape=filter_shape, input_shape=image_shape
        )
        pooled_out = pool.pool_2d(input=conv_out, ws=poolsize, ignore_border=True)
        self.output = T.tanh(pooled_out + self.b.dimshuffle("x", 0, "x", "x"))
        self.params = [self.W, self.b]


class HiddenLayer:
    """A fully connected tanh layer (the tutorial's)."""

    def __init__(self, rng, input, n_in, n_out):
        W_bound = numpy.sqrt(6.0 / (n_in + n_out))
        self.W = theano.shared(
            numpy.asarray(
                rng.uniform(low=-W_bound, high=W_bound, size=(n_in, n_out)), dtype=floatX
            ),
            borrow=True,
        )
        self.b = theano.shared(numpy.zeros((n_out,), dtype=floatX), borrow=True)
        self.output = T.tanh(T.dot(input, self.W) + self.b)
        self.params = [self.W, self.b]


class LogisticRegression:
    """Multi-class logistic regression (the tutorial's output layer)."""

    def __init__(self, input, n_in, n_out):
        self.W = theano.shared(numpy.zeros((n_in, n_out), dtype=floatX), borrow=True)
        self.b = theano.shared(numpy.zeros((n_out,), dtype=floatX), borrow=True)
        self.p_y_given_x = T.nnet.softmax(T.dot(input, self.W) + self.b)
        self.y_pred = T.argmax(self.p_y_given_x, axis=1)
        self.params = [self.W, self.b]

    def cost(self, y):
        return T.mean(T.nnet.categorical_crossentropy(self.p_y_given_x, y))

    def errors(self, y):
        return T.mean(T.neq(self.y_pred, y))


# Construct Theano expression graph
x = T.tensor4("x")
y = T.ivector("y")
nkerns = (20, 50)
layer0 = LeNetConvPoolLayer(
    rng, input=x, image_shape=(batch_size, 1, 28, 28), filter_shape=(nkerns[0], 1, 5, 5)
)
layer1 = LeNetConvPoolLayer(
    rng,
    input=layer0.output,
    image_shape=(batch_size, nkerns[0], 12, 12),
    filter_shape=(nkerns[1], nkerns[0], 5, 5),
)
layer2 = HiddenLayer(rng, input=layer1.output.flatten(2), n_in=nkerns[1] * 4 * 4, n_out=500)
layer3 = LogisticRegression(input=layer2.output, n_in=500, n_out=n_classes)

cost = layer3.cost(y)
params = layer3.params + layer2.params + layer1.params + layer0.params
grads = T.grad(cost, params)
learning_rate = numpy.asarray(0.1, dtype=floatX)
updates = [(p, p - learning_rate * g) for p, g in zip(params, grads)]

# Compile
train = theano.function([x, y], cost, updates=updates)
evaluate = theano.function([x, y], [cost, layer3.errors(y)])


def training_set_loss():
    """Mean cost and accuracy over every minibatch of the training set."""
    results = [
        evaluate(
            data_x[i * batch_size : (i + 1) * batch_size],
            data_y[i * batch_size : (i + 1) * batch_size],
        )
        for i in range(n_batches)
    ]
    costs, errors = zip(*results)
    return float(numpy.mean(costs)), 1.0 - float(numpy.mean(errors))


# Train
print(f"step {0:5d}  loss {training_set_loss()[0]:.4f}")
for step in range(1, args.steps + 1):
    i = (step - 1) % n_batches
    train(
        data_x[i * batch_size : (i + 1) * batch_size], data_y[i * batch_size : (i + 1) * batch_size]
    )
    if step % args.every == 0 or step == args.steps:
        print(f"step {step:5d}  loss {training_set_loss()[0]:.4f}", flush=True)

loss, accuracy = training_set_loss()
print(f"steps: {args.steps}")
print(f"final loss: {loss:.4f}")
print(f"training accuracy: {accuracy:.4f}")
