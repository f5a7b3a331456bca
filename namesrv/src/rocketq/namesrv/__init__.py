"""rocketq.namesrv — see docs/architecture.md."""
