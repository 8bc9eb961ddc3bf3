"""Model providers: the offline echo provider and the HTTP-backed real ones."""
