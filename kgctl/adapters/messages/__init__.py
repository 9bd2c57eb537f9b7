"""Kafka message schemas that kafka-python 3.0.12 does not ship, in its JSON schema format.

kafka-python builds a request or response class from `<ClassName>.json` in the package
named by `load_json=`; `kgctl/adapters/kip848.py` points it here. Field names, types
and versions follow the Kafka protocol guide for the API key in each file.
"""
