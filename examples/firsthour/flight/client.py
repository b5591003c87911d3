"""The pyarrow.flight client of docs/beyond-one-process.md ("Flight from
Python"), against the server of main.go: usage client.py HOST:PORT."""
import json
import sys

import numpy as np
import pyarrow.flight as flight

c = flight.connect("grpc://" + sys.argv[1])
table = c.do_get(flight.Ticket(b"weights")).read_all()
shape = json.loads(table.schema.metadata[b"dlflight:shape"])
x = table.column(0).combine_chunks().to_numpy_ndarray().reshape(shape)
print(table.schema.metadata[b"dlflight:dtype"].decode(), x.shape)
assert x.dtype == np.float32 and x.shape == (3, 4), (x.dtype, x.shape)
assert np.array_equal(x, np.arange(12, dtype=np.float32).reshape(3, 4) / 2), x
print("pyarrow: weights as Go sent them")
