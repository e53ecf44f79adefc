"""Tests of the twin's AWS side, driven through boto3 over HTTP."""
