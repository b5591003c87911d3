"""make compare's Flight rows, the Python side.

flight.py pair PORT: time pyarrow.flight DoGet (do_get + read_all +
    to_numpy_ndarray) of the 1, 64 and 256 MiB float32 tensors from the Go
    server on PORT and from a pyarrow.flight server of the same tensors in
    another process (started here), in interleaved rounds: each round
    fetches from both servers in turn (which goes first alternates), so
    that both meet the same load. Prints the median fetch of each.
flight.py rounds LABEL=PORT...: the same for any number of Go servers
    (one built against a changed gRPC, say), all in the same rounds as
    the pyarrow.flight server (the order rotates every round); prints
    each median and its ratio to pyarrow's.
flight.py serve: that server (prints its port, stops on stdin EOF).
flight.py threads PORT: the 64 and 256 MiB tensors of the Go server on
    PORT fetched as a pyarrow.flight client with threads would: its
    FlightInfo's endpoints (ranges of rows) on 4 threads, concatenated;
    prints the median fetch of each as py-threads/SIZE.
flight.py shm PATH PORT: the shared-file row: np.load(PATH, mmap_mode="r")
    + sum, against the same 256 MiB over Flight from the Go server + sum.
Prints "name seconds" lines.
"""
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

SIZES = [("1MiB", 256), ("64MiB", 256 * 64), ("256MiB", 256 * 256)]
# rounds, and fetches from each server per round
ROUNDS = {"1MiB": (30, 20), "64MiB": (10, 2), "256MiB": (6, 1)}


def fetch(c, name):
    t = c.do_get(flight.Ticket(name.encode())).read_all()
    return t.column(0).combine_chunks().to_numpy_ndarray()


def timerounds(ports, ratios=False):
    """ports: label -> port, "py-server" among them."""
    cs = {k: flight.connect("grpc://127.0.0.1:%d" % p) for k, p in ports.items()}
    keys = sorted(cs)
    for name, _ in SIZES:
        ts = {k: [] for k in cs}
        for k, c in cs.items():
            fetch(c, name)  # warm
        rounds, per = ROUNDS[name]
        for r in range(rounds):
            i = r % len(keys)
            for k in keys[i:] + keys[:i]:
                ts[k] += [_time(lambda: fetch(cs[k], name)) for _ in range(per)]
        med = {k: statistics.median(v) for k, v in ts.items()}
        for k in cs:
            if ratios:
                print("%s/%s %.6f %.3fx" % (k, name, med[k], med["py-server"] / med[k]), flush=True)
            else:
                print("%s/%s %.6f" % (k, name, med[k]), flush=True)


def fetch_threads(c, name, pool):
    info = c.get_flight_info(flight.FlightDescriptor.for_path(name))
    parts = list(pool.map(lambda ep: c.do_get(ep.ticket).read_all().column(0).combine_chunks(), info.endpoints))
    return pa.concat_arrays(parts).to_numpy_ndarray()


def threads(port):
    from concurrent.futures import ThreadPoolExecutor
    c = flight.connect("grpc://127.0.0.1:%d" % port)
    with ThreadPoolExecutor(4) as pool:
        for name, rows in SIZES[1:]:
            a = fetch_threads(c, name, pool)
            assert a.shape == (rows, 1024) and float(a[-1, -1]) == float((rows * 1024 - 1) % 1000), name
            rounds = ROUNDS[name][0] * ROUNDS[name][1]
            med = statistics.median(_time(lambda: fetch_threads(c, name, pool)) for _ in range(rounds))
            print("py-threads/%s %.6f" % (name, med), flush=True)


def withpyserver(fn):
    p = subprocess.Popen([sys.executable, __file__, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    port = int(p.stdout.readline())
    try:
        fn(port)
    finally:
        p.stdin.close()
        p.wait()


def _time(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Server(flight.FlightServerBase):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.t = {}
        for name, rows in SIZES:
            a = (np.arange(rows * 1024, dtype=np.int64) % 1000).astype(np.float32).reshape(rows, 1024)
            self.t[name] = pa.table({"t": pa.FixedShapeTensorArray.from_numpy_ndarray(a)})

    def do_get(self, context, ticket):
        return flight.RecordBatchStream(self.t[ticket.ticket.decode()])


def main():
    mode = sys.argv[1]
    if mode == "serve":
        s = Server(location="grpc://127.0.0.1:0")
        print(s.port, flush=True)
        threading.Thread(target=s.serve, daemon=True).start()
        sys.stdin.read()
        s.shutdown()
    elif mode == "pair":
        withpyserver(lambda port: timerounds({"go-server": int(sys.argv[2]), "py-server": port}))
    elif mode == "rounds":
        gos = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
        if not gos or len(gos) != len(sys.argv) - 2 or "py-server" in gos:
            sys.exit("usage: flight.py rounds LABEL=PORT... (LABEL not py-server)")
        withpyserver(lambda port: timerounds({**{k: int(v) for k, v in gos.items()}, "py-server": port}, ratios=True))
    elif mode == "threads":
        threads(int(sys.argv[2]))
    elif mode == "shm":
        path, port = sys.argv[2], int(sys.argv[3])
        def viafile():
            a = np.load(path, mmap_mode="r")
            return float(a.sum(dtype=np.float64))
        c = flight.connect("grpc://127.0.0.1:%d" % port)
        def viaflight():
            return float(fetch(c, "256MiB").sum(dtype=np.float64))
        s1, s2 = viafile(), viaflight()
        assert s1 == s2, (s1, s2)
        print("shm/file %.6f" % min(_time(viafile) for _ in range(3)))
        print("shm/flight %.6f" % min(_time(viaflight) for _ in range(3)))


if __name__ == "__main__":
    main()
