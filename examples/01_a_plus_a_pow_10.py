"""The first program of the Theano paper: declare, build, compile, call.

Run it with ``python examples/01_a_plus_a_pow_10.py``; it prints ``[   0.    2. 1026.]``.
"""

import opgraph as theano

a = theano.tensor.vector("a")  # declare a symbolic variable
b = a + a**10  # build a symbolic expression
f = theano.function([a], b)  # compile a function
print(f([0, 1, 2]))  # prints [   0.    2. 1026.]
