"""rocketq's RocketMQ 5 proxy: the gRPC endpoint (``apache.rocketmq.v2.MessagingService``) the 5.x SDKs
talk to, in front of NameServers and brokers it reaches over remoting through the client library
(RocketMQ's proxy in cluster mode).  ``mqproxy`` runs it (docs/grpc.md)."""
