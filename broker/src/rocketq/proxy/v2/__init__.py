"""RocketMQ 5's gRPC protocol, ``apache.rocketmq.v2``: the published ``.proto`` files and the modules
generated from them.

``proto/apache/rocketmq/v2/{definition,service}.proto`` are apache/rocketmq-apis's files at the
release named in ``PIN``, unchanged; ``definition_pb2``, ``service_pb2`` (with ``.pyi`` stubs) and
``service_pb2_grpc`` are protoc's output for them, checked in and rewritten only so that they import
each other from this package (:mod:`rocketq.proxy.v2.generate` does both steps;
``broker/tests/test_proxy_protos.py`` fails when the modules and the ``.proto`` files disagree).
The descriptors keep the published file names and the package ``apache.rocketmq.v2``, so one
process cannot load these modules and another copy of the same protos (the Python SDK's
``rocketmq.grpc_protocol``) side by side.
"""
