"""The Python side of examples/flight: a pyarrow.flight client of the Go
tensor server. Usage: client.py HOST:PORT CA_PEM TOKEN."""
import functools
import sys

print = functools.partial(print, flush=True)

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

addr, ca, token = sys.argv[1], sys.argv[2], sys.argv[3]
c = flight.connect("grpc+tls://" + addr, tls_root_certs=open(ca, "rb").read(), override_hostname="localhost")
opts = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token.encode())])

# without the token: refused
try:
    c.do_get(flight.Ticket(b"x")).read_all()
    raise SystemExit("served without a token")
except flight.FlightUnauthenticatedError:
    print("python: no token -> Unauthenticated")

info = c.get_flight_info(flight.FlightDescriptor.for_path("x"), opts)
print("python: flight info", info.app_metadata.decode())
table = c.do_get(flight.Ticket(b"x"), opts).read_all()
x = table.column(0).combine_chunks().to_numpy_ndarray()   # (1000, 64), no copy
want = (np.arange(1000 * 64) % 97).astype(np.float32).reshape(1000, 64) * np.float32(0.5)
assert x.dtype == np.float32 and x.shape == (1000, 64) and np.array_equal(x, want)
assert np.array_equal(np.from_dlpack(table.column(0).chunk(0).storage.flatten()).reshape(1000, 64), want)
print("python: fetched x", x.dtype, x.shape, "equal to NumPy's, through to_numpy_ndarray and np.from_dlpack")

y = 2 * x + 1
try:
    w, _ = c.do_put(flight.FlightDescriptor.for_path("x"), pa.schema([("t", pa.fixed_shape_tensor(pa.float32(), [64]))]), opts)
    w.close()
    raise SystemExit("overwrote x")
except flight.FlightUnauthorizedError:
    print("python: put x -> PermissionDenied (the policy)")
col = pa.FixedShapeTensorArray.from_numpy_ndarray(y)
w, _ = c.do_put(flight.FlightDescriptor.for_path("y"), pa.schema([pa.field("t", col.type)]), opts)
w.write_table(pa.table({"t": col}))
w.close()
print("python: put y = 2x + 1")
