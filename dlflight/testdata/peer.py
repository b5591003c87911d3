"""pyarrow.flight peers of the Go package dlflight, driven by its tests.

client DIR PORT: fetch from a Go server (TLS, bearer token) every tensor of
    DIR/manifest.json, compare with DIR/<name>.bin bit for bit through
    FixedShapeTensorArray.to_numpy_ndarray() and np.from_dlpack, check the
    refusals, and put each tensor back under "py/<name>".
server DIR: serve tensors made here (TLS, bearer token) and write their
    bytes to DIR/<name>.bin and DIR/manifest.json; print the port; take
    puts; stop when stdin closes.
"""
import json
import os
import sys
import threading

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

TOKEN = b"Bearer tok-admin"
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)


def client(d, port):
    with open(os.path.join(d, "ca.pem"), "rb") as f:
        ca = f.read()
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    loc = "grpc+tls://127.0.0.1:%d" % port
    c = flight.connect(loc, tls_root_certs=ca, override_hostname="localhost")
    opts = flight.FlightCallOptions(headers=[(b"authorization", TOKEN)])

    # refusals, as a pyarrow client sees them
    for headers, err in [([], flight.FlightUnauthenticatedError),
                         ([(b"authorization", b"Bearer wrong")], flight.FlightUnauthenticatedError),
                         ([(b"authorization", b"Bearer tok-reader")], flight.FlightUnauthorizedError)]:
        try:
            c.do_get(flight.Ticket(b"secret"), flight.FlightCallOptions(headers=headers)).read_all()
        except err:
            pass
        else:
            raise SystemExit("FAIL: %r was served" % (headers,))

    listed = {fi.descriptor.path[0].decode(): fi for fi in c.list_flights(options=opts)}
    n = 0
    for m in manifest:
        name, shape = m["name"], tuple(m["shape"])
        want = open(os.path.join(d, name + ".bin"), "rb").read()
        fi = listed[name]
        meta = json.loads(fi.app_metadata)
        check(meta == {"name": name, "dtype": m["dtype"], "shape": m["shape"], "bytes": len(want)},
              "%s: app_metadata %r" % (name, meta))
        check(fi.total_bytes == len(want), name + ": total_bytes")
        table = c.do_get(flight.Ticket(name.encode()), opts).read_all()
        check(table.num_columns == 1, name + ": columns")
        check(table.schema.metadata[b"dlflight:shape"] == json.dumps(m["shape"], separators=(",", ":")).encode(),
              "%s: shape metadata %r" % (name, table.schema.metadata))
        col = table.column(0).combine_chunks()
        check(isinstance(col, pa.FixedShapeTensorArray), "%s: %s" % (name, type(col)))
        # pyarrow's own tensor view, then the tensor's shape
        arr = col.to_numpy_ndarray().reshape(shape)
        check(arr.dtype == np.dtype(m["dtype"]), "%s: dtype %s" % (name, arr.dtype))
        check(arr.tobytes() == want, name + ": to_numpy_ndarray bytes differ")
        # DLPack from pyarrow's values array
        dl = np.from_dlpack(col.storage.flatten()).reshape(shape)
        check(dl.tobytes() == want, name + ": np.from_dlpack bytes differ")
        # and back to the Go server
        back = pa.FixedShapeTensorArray.from_numpy_ndarray(arr.reshape((-1,) + shape[1:]) if len(shape) >= 2 else arr.reshape(-1, 1))
        w, _ = c.do_put(flight.FlightDescriptor.for_path("py/" + name),
                        pa.schema([pa.field("t", back.type)], metadata={"dlflight:shape": json.dumps(m["shape"])}), opts)
        w.write_table(pa.table({"t": back}))
        w.close()
        n += 1
    # a tensor above the server's EndpointBytes is several endpoints, each
    # a range of rows: fetched in order, and on threads, they are the tensor
    split = 0
    for m in manifest:
        name, shape = m["name"], tuple(m["shape"])
        want = open(os.path.join(d, name + ".bin"), "rb").read()
        fi = c.get_flight_info(flight.FlightDescriptor.for_path(name), opts)
        if len(fi.endpoints) < 2:
            continue
        split += 1
        parts = [c.do_get(ep.ticket, opts).read_all().column(0) for ep in fi.endpoints]
        arr = pa.concat_arrays([p.combine_chunks() for p in parts]).to_numpy_ndarray().reshape(shape)
        check(arr.tobytes() == want, name + ": the endpoints in order differ from the tensor")
        check(fetch_parallel(c, fi, opts).reshape(shape).tobytes() == want, name + ": the endpoints on threads differ")
    check(split > 0, "no tensor was split into endpoints")
    print("pyarrow client: %d tensors bit for bit (to_numpy_ndarray, np.from_dlpack), put back; refusals as expected; "
          "%d split tensors fetched endpoint by endpoint, in order and on threads" % (n, split))


def fetch_parallel(client, info, options, threads=4):
    """The tensor of a FlightInfo whose endpoints are ranges of rows,
    fetched on threads (pyarrow releases the GIL while it reads)."""
    from concurrent.futures import ThreadPoolExecutor
    def fetch(ep):
        return client.do_get(ep.ticket, options).read_all().column(0).combine_chunks()
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(fetch, info.endpoints))
    return pa.concat_arrays(parts).to_numpy_ndarray()


class Auth(flight.ServerMiddlewareFactory):
    def start_call(self, info, headers):
        if headers.get("authorization", [None])[0] != TOKEN.decode():
            raise flight.FlightUnauthenticatedError("no or wrong token")
        return None


class Server(flight.FlightServerBase):
    def __init__(self, d, **kw):
        super().__init__(**kw)
        self.tensors = {}
        rng = np.random.default_rng(7)
        manifest = []
        for dt in DTYPES:
            for shape in [(5, 3, 2), (4, 6)]:
                name = "%s-%s" % (dt, "x".join(map(str, shape)))
                if dt.startswith("float"):
                    a = rng.standard_normal(shape).astype(dt)
                else:
                    a = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, size=shape, dtype=dt, endpoint=True)
                self.tensors[name] = pa.table({"t": pa.FixedShapeTensorArray.from_numpy_ndarray(a)})
                open(os.path.join(d, name + ".bin"), "wb").write(a.tobytes())
                manifest.append({"name": name, "dtype": dt, "shape": list(shape)})
        json.dump(manifest, open(os.path.join(d, "manifest.json"), "w"))

    def list_flights(self, context, criteria):
        for name, t in self.tensors.items():
            yield flight.FlightInfo(t.schema, flight.FlightDescriptor.for_path(name),
                                    [flight.FlightEndpoint(name.encode(), [])], t.num_rows, t.nbytes)

    def get_flight_info(self, context, descriptor):
        name = descriptor.path[0].decode()
        t = self.tensors[name]
        return flight.FlightInfo(t.schema, descriptor, [flight.FlightEndpoint(name.encode(), [])], t.num_rows, t.nbytes)

    def do_get(self, context, ticket):
        return flight.RecordBatchStream(self.tensors[ticket.ticket.decode()])

    def do_put(self, context, descriptor, reader, writer):
        self.tensors[descriptor.path[0].decode()] = reader.read_all()


def server(d):
    with open(os.path.join(d, "cert.pem"), "rb") as f:
        cert = f.read()
    with open(os.path.join(d, "key.pem"), "rb") as f:
        key = f.read()
    s = Server(d, location="grpc+tls://127.0.0.1:0", tls_certificates=[flight.CertKeyPair(cert, key)],
               middleware={"auth": Auth()})
    print(s.port, flush=True)
    t = threading.Thread(target=s.serve, daemon=True)
    t.start()
    sys.stdin.read()
    s.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]))
    else:
        server(sys.argv[2])
