"""Tests of the eval results folder: journal, manifest, index, logs, metrics, redaction."""
