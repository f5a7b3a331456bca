"""rocketq.connector — see docs/architecture.md."""
