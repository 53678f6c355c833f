"""Small modules every layer may use, which import nothing else of devagent's: JSON-RPC error
hygiene (rpcerrors), input limits (jsonlimits), the addresses the server may call (netpolicy),
the bounded caches' LRU (lru) and the crash points kill tests use (faults)."""
