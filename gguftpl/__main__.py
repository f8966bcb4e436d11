from gguftpl.cli import main

main()
