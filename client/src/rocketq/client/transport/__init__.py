"""Transports over the sans-IO remoting codec: asyncio server/client and a blocking client."""
