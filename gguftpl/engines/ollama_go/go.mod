module gguftpl/ollama

go 1.19
