"""Chapter L10.8, speculative decoding in the engine: the chapter pack (see chapter.toml)."""
