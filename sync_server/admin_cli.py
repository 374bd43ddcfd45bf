"""placeholder"""

import argparse


def add_parser(sub):
    sub.add_parser("admin")


def main(ns: argparse.Namespace) -> int:
    return 2
