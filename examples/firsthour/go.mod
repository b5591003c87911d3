module example.com/firsthour

go 1.25.0
