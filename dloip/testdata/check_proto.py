"""Checks dloip's oip.proto against the peers' own definitions: every
message and field that oip.proto declares must have the same name, number,
type and label in kserve's grpc_predict_v2 and in tritonclient's
grpc_service (the shared-memory and streaming messages only in
Triton's), and every method of the service the same request and response
types.

usage: python check_proto.py path/to/oip.proto kserve|triton
"""
import os
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_tools import protoc


# Fields Triton added to the protocol's messages that kserve's copy lacks.
TRITON_ONLY = {("inference.InferParameter", "double_param"), ("inference.InferParameter", "uint64_param")}


def triton_only(name):
    """Triton's extensions: system shared memory and streaming inference."""
    return "SharedMemory" in name or "Stream" in name


def fields(desc):
    return {f.name: (f.number, f.type, f.is_repeated, f.message_type.full_name if f.message_type else "") for f in desc.fields}


def walk(desc, out):
    out[desc.full_name] = desc
    for n in desc.nested_types:
        walk(n, out)


def messages(fd):
    out = {}
    for m in fd.message_types_by_name.values():
        walk(m, out)
    return out


def main():
    proto = os.path.abspath(sys.argv[1])
    # kserve's and Triton's modules declare the same names in the default
    # pool: one peer per process.
    peer = sys.argv[2]
    if peer == "kserve":
        from kserve.protocol.grpc import grpc_predict_v2_pb2 as peer_pb2
    else:
        from tritonclient.grpc import service_pb2 as peer_pb2

    # Ours goes into a pool of its own: it declares the same names.
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "oip.desc")
        rc = protoc.main(["protoc", "-I", os.path.dirname(proto), "--descriptor_set_out=" + out, proto])
        if rc != 0:
            sys.exit("protoc failed")
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    ours = pool.FindFileByName("oip.proto")

    peers = {peer: peer_pb2.DESCRIPTOR}
    mine = messages(ours)
    checked = 0
    bad = []
    for peer, fd in peers.items():
        theirs = messages(fd)
        for name, m in mine.items():
            if m.GetOptions().map_entry:
                continue
            t = theirs.get(name)
            if t is None:
                if peer == "kserve" and triton_only(name):
                    continue  # Triton's extension
                bad.append(f"{peer}: no message {name}")
                continue
            tf = fields(t)
            for fname, spec in fields(m).items():
                if peer == "kserve" and tf.get(fname) is None and (name, fname) in TRITON_ONLY:
                    continue
                if tf.get(fname) != spec:
                    bad.append(f"{peer}: {name}.{fname}: ours {spec}, theirs {tf.get(fname)}")
                checked += 1
        svc = fd.services_by_name["GRPCInferenceService"]
        for meth in ours.services_by_name["GRPCInferenceService"].methods:
            tm = svc.methods_by_name.get(meth.name)
            if tm is None:
                if peer == "kserve" and triton_only(meth.name):
                    continue
                bad.append(f"{peer}: no method {meth.name}")
                continue
            if (tm.input_type.full_name, tm.output_type.full_name) != (meth.input_type.full_name, meth.output_type.full_name):
                bad.append(f"{peer}: method {meth.name} types differ")
            checked += 1
    for b in bad:
        print(b)
    if bad:
        sys.exit(1)
    print(f"oip.proto matches {peer}: {checked} fields and methods checked")


if __name__ == "__main__":
    main()
