from infercast.cli import main

main()
