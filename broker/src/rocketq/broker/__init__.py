"""rocketq.broker — see docs/architecture.md."""
