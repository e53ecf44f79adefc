"""Storage and models: S3 and FSx claims of a cluster, their contents, and model downloads into them."""
