"""Who may call: API tokens and principals (`auth`), keys derived from the root secret (`keys`),
and the privacy-preserving digests the search audit stores (`audit`)."""
