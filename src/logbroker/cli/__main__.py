"""python -m logbroker.cli"""
from .main import main

main()
