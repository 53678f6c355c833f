from devagent.cli import main

main()
