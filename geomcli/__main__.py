from geomcli.cli import main

main(prog_name="geomcli")
