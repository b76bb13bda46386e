/** A proxy test double's CONNECT: the client's socket joined to HOST:PORT (what undici's proxy agent asks for https, and for http too). */
import net from 'node:net';

export function tunnelTo(client: net.Socket, head: Buffer, port: number, host = '127.0.0.1'): void {
  const upstream = net.connect(port, host, () => {
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
}
