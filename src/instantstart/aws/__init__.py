"""AWS adapter: boto3 clients with adaptive retries and endpoint override, and error translation."""
