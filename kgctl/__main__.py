from kgctl.cli.app import main

main()
