#!/usr/bin/env python3
"""A minimal OTLP/gRPC trace receiver built on Python grpcio and opentelemetry-proto.

conductor's trace tests point `[telemetry.otlp] endpoint` at it: it is an
implementation of the OpenTelemetry collector's TraceService independent of the
Rust exporter that sends to it.

  otlp_receiver.py [--port P]

It listens on 127.0.0.1 (P, or a free port when 0 or absent) and prints, one JSON
document per line on stdout:

  {"kind":"listening","port":P}                       once, when it accepts calls
  {"kind":"span","trace_id":HEX,"span_id":HEX,"parent_span_id":HEX or "",
   "name":STR,"resource":{key:value},"attributes":{key:value}}  per span received

It runs until killed.
"""

import argparse
import json
import sys
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def any_value(value):
    case = value.WhichOneof("value")
    if case is None:
        return None
    if case in ("array_value", "kvlist_value", "bytes_value"):
        return str(getattr(value, case))
    return getattr(value, case)


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        for resource_spans in request.resource_spans:
            resource = {a.key: any_value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    line = {
                        "kind": "span",
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "resource": resource,
                        "attributes": {a.key: any_value(a.value) for a in span.attributes},
                    }
                    print(json.dumps(line), flush=True)
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(), server)
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    if port == 0:
        print(f"cannot listen on 127.0.0.1:{args.port}", file=sys.stderr)
        sys.exit(1)
    server.start()
    print(json.dumps({"kind": "listening", "port": port}), flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
